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
// number of buckets kept (0 = no bound): past it, full buckets are dropped,
// and if none is full a new key is refused, so a flood of new keys cannot
// grow memory without bound.
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
	b, ok := l.get(key, perMinute, now)
	if !ok {
		return Decision{Limit: perMinute, RetryAfter: time.Minute / time.Duration(perMinute)}
	}
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

func (l *Limiters) get(key string, perMinute int, now time.Time) (*bucket, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b != nil && b.perMinute == perMinute {
		return b, true
	}
	if b == nil && l.max > 0 && len(l.buckets) >= l.max {
		l.sweep(now)
		if len(l.buckets) >= l.max {
			return nil, false
		}
	}
	b = &bucket{perMinute: perMinute, lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)}
	l.buckets[key] = b
	return b, true
}

// sweep drops full buckets: forgetting them changes nothing, since a new
// bucket starts full.
func (l *Limiters) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.lim.TokensAt(now) >= float64(b.perMinute) {
			delete(l.buckets, k)
		}
	}
}

// Len returns the number of buckets kept.
func (l *Limiters) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
