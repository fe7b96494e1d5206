package delivery

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"demosvc/projections"
)

// These tests drive the retry state machine directly: no receiver, no
// store, no real time. The loop's tests (delivery_test.go) keep the wire.

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// fixedJitter draws j every time: 0 is the shortest wait (-20%), 0.5 none,
// just under 1 the longest (+20%).
func fixedJitter(j float64) func() float64 { return func() float64 { return j } }

func testPolicy(jitter func() float64) retryPolicy {
	return retryPolicy{maxRetries: 3, backoff: 30 * time.Second, factor: 4, timeout: 5 * time.Second, jitter: jitter}
}

func TestBackoffGrowsByTheFactorPerRetry(t *testing.T) {
	p := testPolicy(fixedJitter(0.5))
	for n, want := range map[int]time.Duration{1: 30 * time.Second, 2: 2 * time.Minute, 3: 8 * time.Minute, 4: 32 * time.Minute} {
		if got := p.delay(n); got != want {
			t.Errorf("delay before retry %d = %s, want %s", n, got, want)
		}
	}
}

// TestADelayPastItsCapIsTheCapNotARetryAtOnce: a backoff and factor whose
// product passes time.Duration's range wrapped round to a negative wait,
// a retry at once; every delay is now at most maxRetryDelay, never below
// zero.
func TestADelayPastItsCapIsTheCapNotARetryAtOnce(t *testing.T) {
	for _, tc := range []struct {
		backoff time.Duration
		factor  float64
		retry   int
	}{{30 * time.Second, 100, 6}, {1000 * time.Hour, 4, 7}, {30 * time.Second, 4, 10}, {time.Hour, 1e300, 3}} {
		p := testPolicy(fixedJitter(0.5))
		p.backoff, p.factor = tc.backoff, tc.factor
		if got := p.delay(tc.retry); got != maxRetryDelay {
			t.Errorf("backoff %s, factor %g, retry %d: delay %s; want the cap, %s", tc.backoff, tc.factor, tc.retry, got, maxRetryDelay)
		}
	}
}

func TestJitterStaysWithinTwentyPercent(t *testing.T) {
	p := testPolicy(fixedJitter(0))
	if got, want := p.delay(2), 96*time.Second; got != want {
		t.Errorf("shortest delay before retry 2 = %s, want %s (-20%%)", got, want)
	}
	p = testPolicy(fixedJitter(math.Nextafter(1, 0)))
	if got, lo, hi := p.delay(2), 144*time.Second-time.Microsecond, 144*time.Second; got < lo || got > hi {
		t.Errorf("longest delay before retry 2 = %s, want %s (+20%%)", got, hi)
	}

	// With the real source: every draw within the bounds, and the draws
	// spread over them (a jitter that is never applied fails here).
	p = testPolicy(rand.Float64)
	base := 2 * time.Minute
	lo, hi := base*8/10, base*12/10
	minGot, maxGot := hi, lo
	for i := 0; i < 10_000; i++ {
		got := p.delay(2)
		if got < lo || got > hi {
			t.Fatalf("draw %d: delay %s outside [%s, %s]", i, got, lo, hi)
		}
		minGot, maxGot = min(minGot, got), max(maxGot, got)
	}
	if minGot > base*85/100 || maxGot < base*115/100 {
		t.Errorf("10,000 delays span only [%s, %s] of [%s, %s]", minGot, maxGot, lo, hi)
	}
}

func TestSettle(t *testing.T) {
	fail500 := result{status: 500}
	t.Run("a failure schedules a retry after the backoff", func(t *testing.T) {
		s := retryState{policy: testPolicy(fixedJitter(0.5))}
		d := &Delivery{Status: StatusPending}
		if v := s.settle(d, fail500, t0); v != verdictRetrying {
			t.Fatalf("verdict %s, want retrying", v)
		}
		if d.Status != StatusPending || d.Attempts != 1 || d.LastStatusCode != 500 ||
			d.LastError != "the receiver answered 500 Internal Server Error" || d.UpdatedAt != t0.Unix() {
			t.Errorf("delivery %+v", d)
		}
		if got, want := time.UnixMilli(d.NextAttemptAt).Sub(t0), 30*time.Second; got != want {
			t.Errorf("next attempt %s after the failure, want %s", got, want)
		}
		now := t0.Add(time.Minute)
		s.settle(d, fail500, now)
		if got, want := time.UnixMilli(d.NextAttemptAt).Sub(now), 2*time.Minute; got != want {
			t.Errorf("second retry %s after the failure, want %s", got, want)
		}
	})
	t.Run("the attempt after the last retry fails the delivery", func(t *testing.T) {
		s := retryState{policy: testPolicy(fixedJitter(0.5))}
		d := &Delivery{Status: StatusPending}
		var verdicts []verdict
		for i := 0; i < 4; i++ {
			verdicts = append(verdicts, s.settle(d, fail500, t0))
		}
		if fmt.Sprint(verdicts) != "[retrying retrying retrying failed]" {
			t.Errorf("verdicts %v, want three retries then failed", verdicts)
		}
		if d.Status != StatusFailed || d.Attempts != 4 || d.NextAttemptAt != 0 {
			t.Errorf("delivery %+v, want failed after 4 attempts, nothing due", d)
		}
	})
	t.Run("a 2xx succeeds and clears the last error", func(t *testing.T) {
		s := retryState{policy: testPolicy(fixedJitter(0.5))}
		d := &Delivery{Status: StatusPending}
		s.settle(d, fail500, t0)
		if v := s.settle(d, result{status: 204}, t0); v != verdictSucceeded {
			t.Fatalf("verdict %s, want succeeded", v)
		}
		if d.Status != StatusSucceeded || d.Attempts != 2 || d.LastError != "" || d.NextAttemptAt != 0 || d.LastStatusCode != 204 {
			t.Errorf("delivery %+v", d)
		}
	})
	t.Run("410 Gone fails the delivery and marks the webhook gone", func(t *testing.T) {
		s := retryState{policy: testPolicy(fixedJitter(0.5))}
		d := &Delivery{Status: StatusPending}
		if v := s.settle(d, result{status: http.StatusGone}, t0); v != verdictDisabled {
			t.Fatalf("verdict %s, want disabled", v)
		}
		if !s.gone || d.Status != StatusFailed || d.Attempts != 1 || d.NextAttemptAt != 0 ||
			d.LastError != "the receiver answered 410 Gone; the webhook is disabled" {
			t.Errorf("gone %v, delivery %+v", s.gone, d)
		}
	})
	t.Run("a timeout names delivery.timeout", func(t *testing.T) {
		s := retryState{policy: testPolicy(fixedJitter(0.5))}
		d := &Delivery{Status: StatusPending}
		s.settle(d, result{err: fmt.Errorf("the whole exchange took longer than 5s: %w", context.DeadlineExceeded)}, t0)
		if d.LastError != "no complete answer within 5s" || d.LastStatusCode != 0 {
			t.Errorf("delivery %+v", d)
		}
	})
	t.Run("a refused address says so", func(t *testing.T) {
		s := retryState{policy: testPolicy(fixedJitter(0.5))}
		d := &Delivery{Status: StatusPending}
		s.settle(d, result{err: fmt.Errorf("dial tcp: %w: 10.0.0.1", ErrRefusedAddress)}, t0)
		if d.LastError != "dial tcp: refused: not a public address: 10.0.0.1" {
			t.Errorf("last_error %q", d.LastError)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		status int
		header string
		want   time.Duration
	}{
		{429, "120", 2 * time.Minute},
		{503, " 7 ", 7 * time.Second},
		{429, "3600", time.Hour},
		{429, "3601", time.Hour}, // capped
		{503, "99999999999999", time.Hour},
		{503, "9223372036854775807", time.Hour},  // would overflow a Duration
		{429, "99999999999999999999", time.Hour}, // past int64
		{429, "+99999999999999999999", time.Hour},
		{429, "-99999999999999999999", 0},
		{500, "120", 0}, // only on 429 and 503
		{200, "120", 0},
		{429, "", 0},
		{429, "0", 0},
		{429, "-5", 0},
		{429, "1.5", 0},
		// The date form, against now (t0 + 1 s): a date past or now is none.
		{429, t0.Add(2 * time.Minute).UTC().Format(http.TimeFormat), 2*time.Minute - time.Second},
		{503, t0.Add(5 * time.Hour).UTC().Format(http.TimeFormat), time.Hour}, // capped
		{429, t0.Add(-time.Minute).UTC().Format(http.TimeFormat), 0},
		{429, t0.Add(time.Second).UTC().Format(http.TimeFormat), 0},
		{429, "Wed, 21 Oct 2026 07:28:00", 0}, // no zone: not a date
		{500, t0.Add(2 * time.Minute).UTC().Format(http.TimeFormat), 0},
	} {
		if got := retryAfter(tc.status, tc.header, t0.Add(time.Second)); got != tc.want {
			t.Errorf("retryAfter(%d, %q) = %s, want %s", tc.status, tc.header, got, tc.want)
		}
	}
}

func TestRetryAfterIsHonouredOnlyWhenLongerThanTheBackoff(t *testing.T) {
	s := retryState{policy: testPolicy(fixedJitter(0.5))} // first retry after 30s
	d := &Delivery{Status: StatusPending}
	s.settle(d, result{status: 503, retryAfter: time.Hour}, t0)
	if got := time.UnixMilli(d.NextAttemptAt).Sub(t0); got != time.Hour {
		t.Errorf("Retry-After 1h: next attempt after %s", got)
	}
	d = &Delivery{Status: StatusPending}
	s.settle(d, result{status: 429, retryAfter: time.Second}, t0)
	if got := time.UnixMilli(d.NextAttemptAt).Sub(t0); got != 30*time.Second {
		t.Errorf("Retry-After 1s under a 30s backoff: next attempt after %s", got)
	}
}

func TestBreaker(t *testing.T) {
	s := retryState{policy: retryPolicy{maxRetries: 10, backoff: time.Second, factor: 2, jitter: fixedJitter(0.5)}}
	// One delivery's retries, however many, do not open it: its receiver
	// may refuse that one event and take the others.
	d := &Delivery{ID: "dlv_a", Status: StatusPending}
	for i := 1; i <= 5; i++ {
		s.settle(d, result{status: 500}, t0)
		if s.paused(1) {
			t.Fatalf("open after %d failed attempts of one delivery", i)
		}
	}
	s.settle(&Delivery{ID: "dlv_b"}, result{status: 503}, t0)
	if s.paused(1) {
		t.Fatal("open after two deliveries failed, want three")
	}
	s.settle(&Delivery{ID: "dlv_c"}, result{err: errors.New("connection refused")}, t0)
	if !s.paused(1) {
		t.Fatal("closed after 3 deliveries failed in a row with a delivery pending")
	}
	if s.paused(0) {
		t.Error("open with nothing pending: the loop could never learn the receiver is back")
	}
	s.settle(d, result{status: 200}, t0)
	if s.paused(1) {
		t.Error("still open after a success")
	}
	if !s.paused(maxPending) || s.paused(maxPending-1) {
		t.Errorf("paused(%d) = %v, paused(%d) = %v: want a bound at %d open deliveries",
			maxPending, s.paused(maxPending), maxPending-1, s.paused(maxPending-1), maxPending)
	}
	// A 410 is not a failure of the receiver: it does not count.
	s = retryState{policy: s.policy}
	for i := 0; i < 3; i++ {
		s.settle(&Delivery{ID: fmt.Sprint(i)}, result{status: http.StatusGone}, t0)
	}
	if s.paused(1) {
		t.Error("410s opened the breaker")
	}
}

func TestRetriesComeDueAtTheirTimeInOrder(t *testing.T) {
	var h retryHeap
	for _, d := range []*Delivery{{ID: "c", NextAttemptAt: 3000}, {ID: "a", NextAttemptAt: 1000}, {ID: "b", NextAttemptAt: 2000}} {
		h.push(d)
	}
	if got := h.untilNext(500); got != 500*time.Millisecond {
		t.Errorf("next due in %s, want 500ms", got)
	}
	if got := h.popDue(999, nil); len(got) != 0 {
		t.Errorf("due at 999: %v, want none a millisecond early", got)
	}
	if got := fmt.Sprint(h.popDue(2000, []string{"x"})); got != "[x a b]" {
		t.Errorf("due at 2000: %s, want [x a b]", got)
	}
	if got := h.untilNext(2000); got != time.Second {
		t.Errorf("next due in %s, want 1s", got)
	}
	h.popDue(3000, nil)
	if got := h.untilNext(3000); got != time.Hour {
		t.Errorf("nothing waiting: wait %s, want an hour", got)
	}
}

// An attempt stopped because its webhook was disabled as it began leaves
// its delivery pending; if the loop goes on (the webhook enabled again
// before the dispatcher stopped it), the delivery is tried again a second
// later, rather than never.
func TestAnAttemptStoppedByADisableIsTriedAgain(t *testing.T) {
	w := openWorld(t, "")
	cfg, clock := clockedConfig()
	dp := New(w.log, w.state, cfg, nil)
	l := newLoop(dp, projections.Target{ID: "wh_1", Account: w.pr.Account.ID})
	d := &Delivery{ID: "dlv_1", Status: StatusPending, NextAttemptAt: clock.Now().UnixMilli()}
	l.pending[d.ID], l.busy[d.ID] = d, true
	if got := l.apply(result{id: d.ID, err: errWebhookGone}); got != nil {
		t.Fatalf("apply recorded an attempt that sent nothing: %+v", got)
	}
	now := clock.Now().UnixMilli()
	if due := l.later.popDue(now+goneRetry.Milliseconds()-1, nil); len(due) != 0 {
		t.Fatalf("tried again at once: %v", due)
	}
	if due := l.later.popDue(now+goneRetry.Milliseconds(), nil); len(due) != 1 || due[0] != d.ID || l.busy[d.ID] {
		t.Errorf("a second later: due %v, busy %v; want %s due, not busy", due, l.busy[d.ID], d.ID)
	}
}
