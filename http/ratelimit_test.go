package http

import (
	"fmt"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLimitersAllowExactlyOneMinuteOfRequests(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewLimiters(clock.now, 0)
	for i := 0; i < 60; i++ {
		d := l.Take("acc_a", 60)
		if !d.Allowed {
			t.Fatalf("request %d refused", i+1)
		}
		if d.Remaining != 59-i {
			t.Errorf("request %d: remaining = %d, want %d", i+1, d.Remaining, 59-i)
		}
	}
	d := l.Take("acc_a", 60)
	if d.Allowed {
		t.Fatal("61st request allowed")
	}
	if d.RetryAfter != time.Second {
		t.Errorf("RetryAfter = %v, want 1s (one token at 1/s)", d.RetryAfter)
	}
	if d.Reset != time.Minute {
		t.Errorf("Reset = %v, want 1m", d.Reset)
	}

	t.Run("tokens come back evenly", func(t *testing.T) {
		clock.advance(time.Second)
		if !l.Take("acc_a", 60).Allowed {
			t.Error("no token back after 1 s at 60/min")
		}
		if l.Take("acc_a", 60).Allowed {
			t.Error("two tokens back after 1 s at 60/min")
		}
	})
	t.Run("accounts do not share a bucket", func(t *testing.T) {
		if !l.Take("acc_b", 60).Allowed {
			t.Error("acc_b refused because acc_a is empty")
		}
	})
	t.Run("zero is unlimited and keeps nothing", func(t *testing.T) {
		before := l.Len()
		for i := 0; i < 1000; i++ {
			if !l.Take("acc_c", 0).Allowed {
				t.Fatal("unlimited account refused")
			}
		}
		if l.Len() != before {
			t.Error("an unlimited account got a bucket")
		}
	})
	t.Run("a plan change takes effect", func(t *testing.T) {
		if d := l.Take("acc_a", 300); !d.Allowed || d.Limit != 300 {
			t.Errorf("after the limit rose to 300: %+v", d)
		}
	})
}

func TestLimitersStayBoundedUnderAFloodOfNewKeys(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewLimiters(clock.now, 100)
	for i := 0; i < 10_000; i++ {
		l.Take(fmt.Sprintf("10.0.%d.%d", i/256, i%256), 60)
	}
	if l.Len() > 100 {
		t.Fatalf("%d buckets kept, bound is 100", l.Len())
	}
	// Once their buckets are full again, new addresses get in.
	clock.advance(2 * time.Minute)
	if !l.Take("192.0.2.1", 60).Allowed {
		t.Error("a new address is refused although every bucket is full again")
	}
}
