package delivery

import "time"

// Clock is the time deliveries run on: when a delivery is created and due,
// the stored and signed timestamps, and the timer a loop waits on for its
// next retry. The binary runs on SystemClock; a test injects a clock it
// moves by hand, so retries come when the test says, without sleeping.
// The network's own deadline on an attempt (delivery.timeout) stays on
// real time: it bounds a real exchange.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's one-shot timer, with the semantics of *time.Timer
// since Go 1.23: after Reset or Stop returns, no time from before it is
// received on C.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// SystemClock is the real clock: time.Now and time.NewTimer.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time   { return s.t.C }
func (s systemTimer) Reset(d time.Duration) { s.t.Reset(d) }
func (s systemTimer) Stop()                 { s.t.Stop() }
