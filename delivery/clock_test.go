package delivery

import (
	"sync"
	"testing"
	"time"
)

// manualClock is a Clock that moves only when a test calls Advance: a
// retry is due when the test says, and no test sleeps to wait for one.
type manualClock struct {
	mu    sync.Mutex
	now   time.Time
	armed map[*manualTimer]bool
}

func newManualClock() *manualClock {
	// Near the real time, so that event times (from the log's own clock)
	// and delivery times stay comparable.
	return &manualClock{now: time.Now().Truncate(time.Millisecond), armed: map[*manualTimer]bool{}}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) NewTimer(d time.Duration) Timer {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the clock by d and fires every timer due by then.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.armed {
		if !t.at.After(c.now) {
			delete(c.armed, t)
			t.fire(c.now)
		}
	}
}

type manualTimer struct {
	c  *manualClock
	ch chan time.Time
	at time.Time
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

// Reset re-arms the timer; like a time.Timer since Go 1.23, a time from
// before the reset is never received after it. d <= 0 fires at once.
func (t *manualTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drain()
	t.at = t.c.now.Add(d)
	if d <= 0 {
		delete(t.c.armed, t)
		t.fire(t.c.now)
		return
	}
	t.c.armed[t] = true
}

func (t *manualTimer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	delete(t.c.armed, t)
	t.drain()
}

func (t *manualTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

func (t *manualTimer) fire(now time.Time) {
	select {
	case t.ch <- now:
	default:
	}
}

// The loops' tests rest on this clock; it gets its own check.
func TestManualClockFiresTimersOnlyWhenAdvancedPastThem(t *testing.T) {
	c := newManualClock()
	start := c.Now()
	tm := c.NewTimer(time.Minute)
	fired := func() bool {
		select {
		case <-tm.C():
			return true
		default:
			return false
		}
	}
	c.Advance(time.Minute - time.Millisecond)
	if fired() {
		t.Fatal("fired before it was due")
	}
	if got := c.Now().Sub(start); got != time.Minute-time.Millisecond {
		t.Fatalf("Now moved by %s, want 59.999s", got)
	}
	c.Advance(time.Millisecond)
	if !fired() {
		t.Fatal("did not fire when due")
	}
	tm.Reset(time.Second)
	c.Advance(2 * time.Second)
	tm.Reset(time.Hour) // the time fired by the last Advance is stale now
	if fired() {
		t.Fatal("a stale time was received after Reset")
	}
	tm.Reset(0)
	if !fired() {
		t.Fatal("Reset(0) did not fire at once")
	}
	tm.Reset(time.Second)
	tm.Stop()
	c.Advance(time.Hour)
	if fired() {
		t.Fatal("a stopped timer fired")
	}
}
