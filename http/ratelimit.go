package http

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiters holds one token bucket per key (an account, or a client address
// for requests with a bad key). A bucket holds one minute's worth of
// requests and refills evenly.
type Limiters struct {
	clock func() time.Time
	max   int // most buckets kept; 0 = no bound

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	perMinute int
	lim       *rate.Limiter
}

// Decision is the outcome of one request against a bucket.
type Decision struct {
	Allowed   bool
	Limit     int // requests per minute; 0 = unlimited
	Remaining int
	// Reset is how long until the bucket is full again.
	Reset time.Duration
	// RetryAfter is how long until one request is allowed, when refused.
	RetryAfter time.Duration
}

// NewLimiters returns an empty set of buckets reading clock. max bounds the
// number of buckets kept (0 = no bound), so that a flood of new keys cannot
// grow memory without bound: past it, a new key takes the place of another
// (see evict). It is never refused for want of room: refusing every new key
// once the map is full let anyone who could fill it (100,000 addresses every
// few seconds) lock every other client out of signing in.
func NewLimiters(clock func() time.Time, max int) *Limiters {
	return &Limiters{clock: clock, max: max, buckets: map[string]*bucket{}}
}

// Take spends one token of key's bucket, which allows perMinute requests a
// minute (0 = unlimited: always allowed, nothing kept).
func (l *Limiters) Take(key string, perMinute int) Decision {
	if perMinute <= 0 {
		return Decision{Allowed: true}
	}
	now := l.clock()
	b := l.get(key, perMinute, now)
	allowed := b.lim.AllowN(now, 1)
	tokens := b.lim.TokensAt(now)
	perSecond := float64(perMinute) / 60
	d := Decision{
		Allowed:   allowed,
		Limit:     perMinute,
		Remaining: int(math.Floor(tokens)),
		Reset:     seconds((float64(perMinute) - tokens) / perSecond),
	}
	if !allowed {
		d.RetryAfter = seconds((1 - tokens) / perSecond)
	}
	return d
}

func seconds(s float64) time.Duration {
	if s < 0 {
		s = 0
	}
	return time.Duration(s * float64(time.Second))
}

func (l *Limiters) get(key string, perMinute int, now time.Time) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b != nil && b.perMinute == perMinute {
		return b
	}
	if b == nil && l.max > 0 && len(l.buckets) >= l.max {
		l.evict(now)
	}
	b = &bucket{perMinute: perMinute, lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)}
	l.buckets[key] = b
	return b
}

// evictSample is how many buckets evict looks at.
const evictSample = 16

// evict drops one bucket of a sample of evictSample (a map's iteration
// starts at a random place): the first full one, whose loss changes
// nothing since a new bucket starts full, or else the fullest. A key that
// has spent most of its bucket (an address guessing passwords) is the last
// a sample drops, so a flood of fresh keys displaces its own kind rather
// than resetting the count of a key that is being limited. The work is
// bounded per new key; scanning every bucket was 100,000 a request.
func (l *Limiters) evict(now time.Time) {
	victim, most, seen := "", -1.0, 0
	for k, b := range l.buckets {
		tokens := b.lim.TokensAt(now) / float64(b.perMinute)
		if tokens >= 1 {
			victim = k
			break
		}
		if tokens > most {
			victim, most = k, tokens
		}
		if seen++; seen == evictSample {
			break
		}
	}
	delete(l.buckets, victim)
}

// Len returns the number of buckets kept.
func (l *Limiters) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
