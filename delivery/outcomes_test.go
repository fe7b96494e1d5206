package delivery

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/eventlog"
)

// TestAttemptsHoursAndEventIndexAreRecorded: a receiver that fails twice
// then succeeds leaves, in the store, the delivery's three attempts (code,
// error, time), the hour's outcomes (two retrying, one succeeded), and the
// delivery found by the seq of the event that caused it; all of it
// survives a restart, and the filters of the attempt log select by status
// and event.
func TestAttemptsHoursAndEventIndexAreRecorded(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir)
	rv := newReceiver(t, func(n int) (int, time.Duration) {
		if n <= 2 {
			return 503, 0
		}
		return 204, 0
	})
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	waitAdvancing(t, clock, time.Second, "a succeeded delivery", deliveriesAre(t, w, wh.ID, 1, succeeded))
	check := func(when string) {
		t.Helper()
		d := deliveriesOf(t, w, wh.ID)[0]
		detail, err := w.m.Detail(wh.ID, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(detail.Log) != 3 {
			t.Fatalf("%s: attempt log %+v, want 3 attempts", when, detail.Log)
		}
		for i, want := range []int{503, 503, 204} {
			a := detail.Log[i]
			if a.StatusCode != want || (want == 503) != (a.Error != "") || a.StartedAt == 0 || a.DurationMS < 0 {
				t.Errorf("%s: attempt %d %+v, want status %d with an error only on failure", when, i+1, a, want)
			}
		}
		hours, err := w.m.Hourly(wh.ID, clock.Now(), 24)
		if err != nil {
			t.Fatal(err)
		}
		total := Outcomes{}
		for _, h := range hours {
			total.Succeeded += h.Succeeded
			total.Retrying += h.Retrying
			total.Failed += h.Failed
		}
		if total != (Outcomes{Succeeded: 1, Retrying: 2}) {
			t.Errorf("%s: outcomes over 24 h %+v, want 1 succeeded, 2 retrying", when, total)
		}
		if !hours[23].Hour.Equal(clock.Now().UTC().Truncate(time.Hour)) {
			t.Errorf("%s: the last hour is %v, want the current one", when, hours[23].Hour)
		}
		byEvent, err := w.m.DeliveriesOfEvent(wh.ID, d.Seq)
		if err != nil || len(byEvent) != 1 || byEvent[0].ID != d.ID {
			t.Errorf("%s: deliveries of seq %d: %+v, %v", when, d.Seq, byEvent, err)
		}
		if other, _ := w.m.DeliveriesOfEvent(wh.ID, d.Seq+1); len(other) != 0 {
			t.Errorf("%s: seq %d caused no delivery, got %+v", when, d.Seq+1, other)
		}
		for _, f := range []struct {
			f    Filter
			want int
		}{{Filter{Status: StatusSucceeded}, 1}, {Filter{Status: StatusFailed}, 0},
			{Filter{Event: "contact.created"}, 1}, {Filter{Event: "lead.hot"}, 0}} {
			ds, _, _, err := w.m.SearchDeliveries(wh.ID, 10, "", f.f)
			if err != nil || len(ds) != f.want {
				t.Errorf("%s: filter %+v gave %d deliveries (%v), want %d", when, f.f, len(ds), err, f.want)
			}
		}
	}
	check("live")
	w.close()
	w = openWorld(t, dir)
	w.start(cfg)
	check("after a restart")
}

// TestOutcomesAreWrittenInBatches: the outcomes of attempts that ended
// are held for one write while another attempt is in flight. With the
// first of 20 deliveries held by its receiver and the clock standing
// still, the other 19 succeed and none of their outcomes is written; once
// the held one ends, the 20 take one write. With one held again, what has
// gathered is written once the oldest outcome has waited maxOutcomeHold.
func TestOutcomesAreWrittenInBatches(t *testing.T) {
	w := openWorld(t, "")
	var received atomic.Int64
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	rv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch received.Add(1) {
		case 1:
			<-release[0]
		case 21:
			<-release[1]
		}
	}))
	t.Cleanup(rv.Close)
	var releases [2]sync.Once
	releaseHeld := func(i int) { releases[i].Do(func() { close(release[i]) }) }
	// Before the server closes and the dispatcher stops, which wait
	// for the held requests, when the test fails.
	t.Cleanup(func() { releaseHeld(0); releaseHeld(1) })
	wh := w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	for i := range 20 {
		w.startSession(agent, fmt.Sprintf("p%d@example.com", i))
	}
	hw := newHoldingWriter()
	cfg, clock := clockedConfig()
	w.startWith(cfg, nil, hw.install)
	outcomeWrites := hw.outcomeWrites

	waitFor(t, "20 deliveries sent", func() bool { return received.Load() == 20 })
	if n := outcomeWrites.Load(); n != 0 {
		t.Fatalf("%d outcome writes while an attempt was in flight, want 0", n)
	}
	releaseHeld(0)
	waitFor(t, "20 deliveries succeeded", deliveriesAre(t, w, wh.ID, 20, succeeded))
	if n := outcomeWrites.Load(); n != 1 {
		t.Fatalf("20 outcomes took %d writes, want 1", n)
	}

	for i := range 20 {
		w.startSession(agent, fmt.Sprintf("q%d@example.com", i))
	}
	waitFor(t, "20 more deliveries sent", func() bool { return received.Load() == 40 })
	waitAdvancing(t, clock, maxOutcomeHold, "outcomes written while an attempt is held",
		func() bool { return outcomeWrites.Load() > 1 })
	releaseHeld(1)
	waitFor(t, "40 deliveries succeeded", deliveriesAre(t, w, wh.ID, 40, succeeded))
}

// TestOutcomesAreNotHeldBehindASyncingWriteOfNewDeliveries: while the
// write of new deliveries syncs (here until the test says), the outcomes
// of attempts that ended start their write, to be durable with it: a
// stream of new events, whose writes may overlap, never keeps outcomes
// from being written.
func TestOutcomesAreNotHeldBehindASyncingWriteOfNewDeliveries(t *testing.T) {
	w := openWorld(t, "")
	var received atomic.Int64
	answer, syncFresh := make(chan struct{}), make(chan struct{})
	var once [2]sync.Once
	release := func(i int, ch chan struct{}) { once[i].Do(func() { close(ch) }) }
	rv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n := received.Add(1); n > 1 && n <= 6 {
			<-answer
		}
	}))
	t.Cleanup(rv.Close)
	t.Cleanup(func() { release(0, answer); release(1, syncFresh) })
	wh := w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	hw := newHoldingWriter()
	hw.release = syncFresh
	cfg, _ := clockedConfig()
	w.startWith(cfg, nil, hw.install)
	// One delivery first: the loop reads the hour's stored count with
	// its first outcome, and a read waits for every write syncing.
	w.startSession(agent, "first@example.com")
	waitFor(t, "the first delivery succeeded", deliveriesAre(t, w, wh.ID, 1, succeeded))
	for i := range 5 {
		w.startSession(agent, fmt.Sprintf("p%d@example.com", i))
	}
	waitFor(t, "5 more deliveries sent", func() bool { return received.Load() == 6 })
	hw.hold.Store(true)
	w.startSession(agent, "q@example.com")
	waitFor(t, "the write of the new delivery started", func() bool { return hw.held.Load() == 1 })

	release(0, answer)
	waitFor(t, "the 5 outcomes' write started while the new delivery's syncs",
		func() bool { return hw.outcomeWrites.Load() == 2 })
	release(1, syncFresh)
	waitFor(t, "7 deliveries succeeded", deliveriesAre(t, w, wh.ID, 7, succeeded))
}

// holdingWriter counts the writes of outcomes, and while hold is set
// holds the fsync of every write of new deliveries (one that moves a
// cursor) until release is closed.
type holdingWriter struct {
	stateWriter
	hold          *atomic.Bool
	held          *atomic.Int64
	outcomeWrites *atomic.Int64
	release       chan struct{}
}

func newHoldingWriter() *holdingWriter {
	return &holdingWriter{hold: new(atomic.Bool), held: new(atomic.Int64), outcomeWrites: new(atomic.Int64)}
}

// install puts h in front of the dispatcher's writer of the delivery state.
func (h *holdingWriter) install(dp *Dispatcher) {
	h.stateWriter = dp.store.w
	dp.store.w = *h
}

func (h holdingWriter) StartWriteSync(puts []eventlog.Put, delFrom, delTo []byte) func() error {
	synced := h.stateWriter.StartWriteSync(puts, delFrom, delTo)
	if len(puts) == 0 || !isCursorKey(puts[len(puts)-1].Key) {
		h.outcomeWrites.Add(1)
		return synced
	}
	if !h.hold.Load() {
		return synced
	}
	h.held.Add(1)
	return func() error {
		<-h.release
		return synced()
	}
}
