package delivery

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// retryPolicy is what delivery.* says about retries.
type retryPolicy struct {
	maxRetries int           // retries after the first attempt
	backoff    time.Duration // the first retry's delay
	factor     float64       // growth per retry
	timeout    time.Duration // an attempt's whole exchange, named in last_error
	jitter     func() float64
}

// delay is delivery.backoff * factor^(n-1), ±20% jitter, before the n-th
// retry, at most maxRetryDelay.
func (p retryPolicy) delay(n int) time.Duration {
	d := float64(p.backoff) * math.Pow(p.factor, float64(n-1)) * (0.8 + 0.4*p.jitter())
	if d >= float64(maxRetryDelay) || math.IsNaN(d) {
		// Also before the conversion: a product past time.Duration's
		// range wrapped round to a negative wait, a retry at once.
		return maxRetryDelay
	}
	return time.Duration(d)
}

// maxRetryDelay caps the wait before a retry, whatever delivery.backoff
// and delivery.backoff_factor give (the defaults' third and last retry
// waits 8 minutes).
const maxRetryDelay = 7 * 24 * time.Hour

// maxRetryAfter caps the wait a receiver's Retry-After can ask for.
const maxRetryAfter = time.Hour

// retryAfter is the wait a 429 or 503 answer asks for with Retry-After,
// in seconds or as an HTTP date (RFC 9110) taken against now, at most
// maxRetryAfter; 0 when there is none to honour.
func retryAfter(status int, header string, now time.Time) time.Duration {
	if header == "" || status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return 0
	}
	header = strings.TrimSpace(header)
	secs, err := strconv.ParseInt(header, 10, 64)
	if errors.Is(err, strconv.ErrRange) && header[0] != '-' {
		return maxRetryAfter // digits past int64: a wait longer than the cap
	}
	if err != nil {
		at, derr := http.ParseTime(header)
		if derr != nil {
			return 0
		}
		return max(0, min(at.Sub(now), maxRetryAfter).Truncate(time.Second)) // a date past: none
	}
	if secs <= 0 {
		return 0
	}
	// Capped before it is multiplied: a huge value must not overflow into
	// a negative wait.
	return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
}

// breakerFailures deliveries failing in a row (attempts of that many
// different deliveries failed, none succeeded since) pause building new
// deliveries for a webhook until one succeeds. Different deliveries: the
// retries of one event its receiver refuses, while it takes the others,
// must not hold the others back.
const breakerFailures = 3

// maxPending bounds the deliveries a webhook has open: past it, no new ones
// are built until some end.
const maxPending = 1024

// verdict is what an attempt's outcome made of its delivery; it is also
// the attempts metric's result label.
type verdict string

const (
	verdictSucceeded verdict = "succeeded"
	verdictRetrying  verdict = "retrying"
	verdictFailed    verdict = "failed"
	verdictDisabled  verdict = "disabled" // 410 Gone
)

// retryState is the retry state machine of one webhook: what each
// attempt's outcome does to its delivery, when the next attempt is due,
// and whether the webhook's breaker is open. It reads no clock and sends
// nothing: the loop hands it the time and the outcome, so tests drive it
// directly.
type retryState struct {
	policy retryPolicy
	// failing holds the ids of the deliveries whose attempts failed since
	// the last success, up to breakerFailures of them.
	failing []string
	gone    bool // the receiver answered 410 Gone: the webhook is to be disabled
}

// settle records the outcome r of an attempt of d, made at now, in d:
// attempts, last status and error, and the next attempt when a retry is
// due (the backoff, or a longer Retry-After). It returns what became of d.
func (s *retryState) settle(d *Delivery, r result, now time.Time) verdict {
	d.Attempts++
	d.LastStatusCode = r.status
	d.UpdatedAt = now.Unix()
	switch {
	case r.err == nil && r.status >= 200 && r.status < 300:
		d.Status, d.LastError, d.NextAttemptAt = StatusSucceeded, "", 0
		s.failing = s.failing[:0]
		return verdictSucceeded
	case r.err == nil && r.status == http.StatusGone:
		// The receiver says the endpoint is gone for good: stop sending
		// anything to this webhook.
		d.Status, d.NextAttemptAt = StatusFailed, 0
		d.LastError = "the receiver answered 410 Gone; the webhook is disabled"
		s.gone = true
		return verdictDisabled
	}
	if len(s.failing) < breakerFailures && !slices.Contains(s.failing, d.ID) {
		s.failing = append(s.failing, d.ID)
	}
	d.LastError = describe(r, s.policy.timeout)
	if d.Attempts > s.policy.maxRetries {
		d.Status, d.NextAttemptAt = StatusFailed, 0
		return verdictFailed
	}
	wait := max(s.policy.delay(d.Attempts), r.retryAfter)
	d.NextAttemptAt = now.Add(wait).UnixMilli()
	return verdictRetrying
}

// paused reports whether the loop builds no new deliveries, given the
// deliveries it has open. While the receiver keeps failing, the cursor
// stays (durably) behind, so nothing is lost, and a dead receiver costs
// neither CPU nor disk for every new event. One success, or no delivery
// left pending, lifts the pause. Likewise with maxPending deliveries still
// open: a healthy receiver drains them at once, a dead one does not, and
// memory stays bounded either way.
func (s *retryState) paused(pending int) bool {
	return len(s.failing) >= breakerFailures && pending > 0 || pending >= maxPending
}

// describe is the last_error of a failed attempt.
func describe(r result, timeout time.Duration) string {
	switch {
	case r.err == nil:
		return fmt.Sprintf("the receiver answered %d %s", r.status, http.StatusText(r.status))
	case errors.Is(r.err, ErrRefusedAddress):
		return r.err.Error()
	case errors.Is(r.err, context.DeadlineExceeded):
		return fmt.Sprintf("no complete answer within %s", timeout)
	default:
		return r.err.Error()
	}
}

// retryHeap orders deliveries waiting for a retry by when it is due.
type retryHeap []retryAt

type retryAt struct {
	at int64 // unix ms
	id string
}

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(retryAt)) }
func (h *retryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *retryHeap) push(d *Delivery) { heap.Push(h, retryAt{at: d.NextAttemptAt, id: d.ID}) }

// popDue appends to ready, and removes, every delivery due by now (unix
// ms), the earliest first. A delivery is due at its NextAttemptAt, not a
// millisecond before.
func (h *retryHeap) popDue(now int64, ready []string) []string {
	for h.Len() > 0 && (*h)[0].at <= now {
		ready = append(ready, heap.Pop(h).(retryAt).id)
	}
	return ready
}

// untilNext is how long after now (unix ms) the next retry is due; an hour
// when none is waiting, since new work wakes the loop anyway.
func (h retryHeap) untilNext(now int64) time.Duration {
	if h.Len() == 0 {
		return time.Hour
	}
	return time.Duration(h[0].at-now) * time.Millisecond
}
