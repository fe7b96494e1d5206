package delivery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/projections"
)

// The loops' behaviour with real receivers, on the manual clock: retries,
// delete, 410, the breaker, isolation between webhooks, restarts.

func TestRetries(t *testing.T) {
	t.Run("three failures then success is four attempts and succeeded", func(t *testing.T) {
		w := openWorld(t, "")
		rv := newReceiver(t, func(n int) (int, time.Duration) {
			if n <= 3 {
				return 500, 0
			}
			return 200, 0
		})
		wh := w.register(rv.URL, "contact.created")
		cfg, clock := clockedConfig()
		w.start(cfg)
		w.startSession(w.newAgent(), "a@example.com")
		waitAdvancing(t, clock, time.Second, "a succeeded delivery", func() bool {
			ds := deliveriesOf(t, w, wh.ID)
			return len(ds) == 1 && ds[0].Status == StatusSucceeded
		})
		ds := deliveriesOf(t, w, wh.ID)
		if ds[0].Attempts != 4 || rv.count() != 4 || ds[0].LastStatusCode != 200 {
			t.Errorf("delivery %+v after %d requests, want 4 attempts", ds[0], rv.count())
		}
		for i, r := range rv.all() {
			if got := r.header.Get("X-Service-Delivery-Attempt"); got != fmt.Sprint(i+1) {
				t.Errorf("request %d carried attempt %s", i+1, got)
			}
		}
	})
	t.Run("a retry is due after the backoff on the injected clock", func(t *testing.T) {
		w := openWorld(t, "")
		rv, healthy := newSwitchableReceiver(t)
		wh := w.register(rv.URL, "contact.created")
		cfg, clock := clockedConfig()
		cfg.Backoff = time.Hour // a real hour: only the clock can bring it
		w.start(cfg)
		failedAt := clock.Now()
		w.startSession(w.newAgent(), "a@example.com")
		waitFor(t, "the first attempt recorded", func() bool {
			ds := deliveriesOf(t, w, wh.ID)
			return len(ds) == 1 && ds[0].Attempts == 1
		})
		d := deliveriesOf(t, w, wh.ID)[0]
		if due := time.UnixMilli(d.NextAttemptAt).Sub(failedAt); d.Status != StatusPending || due < 48*time.Minute || due > 72*time.Minute {
			t.Fatalf("after one failure: %s, next attempt %s after it; want pending, 1h ±20%%", d.Status, due)
		}
		healthy.Store(true)
		clock.Advance(time.UnixMilli(d.NextAttemptAt).Sub(failedAt))
		waitFor(t, "the retry, once the clock reaches it", func() bool {
			ds := deliveriesOf(t, w, wh.ID)
			return ds[0].Status == StatusSucceeded && ds[0].Attempts == 2
		})
	})
	t.Run("a receiver that always fails gets exactly four attempts", func(t *testing.T) {
		w := openWorld(t, "")
		rv := newReceiver(t, func(int) (int, time.Duration) { return 503, 0 })
		wh := w.register(rv.URL, "contact.created")
		cfg, clock := clockedConfig()
		w.start(cfg)
		w.startSession(w.newAgent(), "a@example.com")
		waitAdvancing(t, clock, time.Second, "a failed delivery", func() bool {
			ds := deliveriesOf(t, w, wh.ID)
			return len(ds) == 1 && ds[0].Status == StatusFailed
		})
		d := deliveriesOf(t, w, wh.ID)[0]
		if d.Attempts != 4 || rv.count() != 4 || d.LastError != "the receiver answered 503 Service Unavailable" || d.NextAttemptAt != 0 {
			t.Errorf("delivery %+v after %d requests", d, rv.count())
		}
	})
	t.Run("a receiver slower than the timeout fails", func(t *testing.T) {
		w := openWorld(t, "")
		rv := newReceiver(t, func(int) (int, time.Duration) { return 200, 5 * time.Second })
		wh := w.register(rv.URL, "contact.created")
		cfg, _ := clockedConfig()
		cfg.Timeout, cfg.MaxRetries = 100*time.Millisecond, 0
		w.start(cfg)
		w.startSession(w.newAgent(), "a@example.com")
		waitFor(t, "a failed delivery", func() bool {
			ds := deliveriesOf(t, w, wh.ID)
			return len(ds) == 1 && ds[0].Status == StatusFailed
		})
		if d := deliveriesOf(t, w, wh.ID)[0]; !strings.Contains(d.LastError, "100ms") {
			t.Errorf("last_error %q does not name the timeout", d.LastError)
		}
	})
	t.Run("one event's retries do not hold back the next event", func(t *testing.T) {
		w := openWorld(t, "")
		rv := newReceiver(t, func(n int) (int, time.Duration) {
			if n == 1 {
				return 500, 0
			}
			return 200, 0
		})
		wh := w.register(rv.URL, "contact.created")
		cfg, _ := clockedConfig() // never advanced: the first event's retry never comes due
		w.start(cfg)
		agent := w.newAgent()
		w.startSession(agent, "a@example.com")
		waitFor(t, "the first attempt", func() bool { return rv.count() == 1 })
		w.startSession(agent, "b@example.com")
		waitFor(t, "the second event, before the first event's retry", func() bool { return rv.count() == 2 })
		waitFor(t, "both outcomes recorded", func() bool {
			ds := deliveriesOf(t, w, wh.ID)
			return len(ds) == 2 && ds[0].Status == StatusSucceeded && ds[1].Status == StatusPending && ds[1].Attempts == 1
		})
	})
}

func TestDeleteStopsEverythingForThatWebhook(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, func(int) (int, time.Duration) { return 500, 0 })
	wh := w.register(rv.URL, "contact.created")
	other := newReceiver(t, nil)
	w.register(other.URL, "contact.created")
	cfg, clock := clockedConfig()
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "a@example.com")
	waitFor(t, "the first attempt recorded, its retry pending", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		return len(ds) == 1 && ds[0].Attempts == 1 && ds[0].Status == StatusPending
	})
	if err := w.state.DeleteWebhook(t.Context(), w.pr, wh.ID); err != nil {
		t.Fatal(err)
	}
	// The attempt log is dropped only after the loop has returned: from
	// then on nothing of it can send.
	waitFor(t, "the deleted webhook's attempt log to go", func() bool { return len(deliveriesOf(t, w, wh.ID)) == 0 })
	if w.hasLoop(wh.ID) {
		t.Fatal("the deleted webhook still has a loop")
	}
	// Its retry's time comes and goes; the other webhook gets a new event
	// on the same clock, the deleted one nothing.
	clock.Advance(24 * time.Hour)
	w.startSession(agent, "b@example.com")
	waitFor(t, "the other webhook's two events", func() bool { return other.count() == 2 })
	if n := rv.count(); n != 1 {
		t.Fatalf("%d requests after DELETE, want none after the first", n-1)
	}
	if len(deliveriesOf(t, w, wh.ID)) != 0 {
		t.Error("the deleted webhook has an attempt log again")
	}
}

func TestABacklogAndPendingRetriesSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir)
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	cfg, clock := clockedConfig()
	cfg.Backoff, cfg.MaxRetries = time.Second, 10
	w.sessions(t, agent, 0, 100) // one chunk: each gets its first attempt, which fails
	w.start(cfg)
	waitFor(t, "100 first attempts recorded", pendingAfterOneAttempt(t, w, wh.ID, 100))
	w.stop()
	w.stop = nil
	w.sessions(t, agent, 100, 10_000) // a backlog appended while nothing delivers
	w.close()

	healthy.Store(true)
	w = openWorld(t, dir)
	clock.Advance(time.Second) // ids of the new run sort after the old ones
	w.start(cfg)
	waitAdvancing(t, clock, time.Second, "10,100 deliveries succeeded", func() bool {
		ds, _, err := w.m.Deliveries(wh.ID, 20_000, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 10_100 {
			return false
		}
		for _, d := range ds {
			if d.Status != StatusSucceeded {
				return false
			}
		}
		return true
	})
	ds, _, err := w.m.Deliveries(wh.ID, 20_000, "")
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{} // event id -> its delivery's body
	for _, d := range ds {
		bodies[d.EventID] = d.Body
	}
	seen := map[string]bool{}
	for _, r := range rv.all() {
		id := r.header.Get("X-Service-Event-Id")
		if r.header.Get("X-Service-Delivery-Attempt") != "" {
			seen[id] = true
		}
		if !bytes.Contains(bodies[id], []byte(`"contact.created"`)) || !bytes.Equal(r.body, bodies[id]) {
			t.Fatalf("event %s was sent %q, not its body %q", id, r.body, bodies[id])
		}
	}
	if len(seen) != 10_100 {
		t.Errorf("%d distinct events reached the receiver, want 10,100", len(seen))
	}
}

// A 410 disables the webhook once the attempts in flight beside it have
// ended: their answers are recorded as the attempts they were (here a
// second 410), not dropped and sent again as first attempts once the
// webhook is enabled.
func TestGoneWaitsForTheAttemptsInFlight(t *testing.T) {
	w := openWorld(t, "")
	var held atomic.Int32
	both := make(chan struct{})
	rv := newReceiver(t, func(int) (int, time.Duration) {
		if held.Add(1) == 2 {
			close(both)
		}
		<-both
		return http.StatusGone, 0
	})
	wh := w.register(rv.URL, "contact.created")
	cfg, _ := clockedConfig()
	cfg.Concurrency = 4
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "a@example.com")
	w.startSession(agent, "b@example.com")
	waitFor(t, "the webhook disabled", func() bool { return w.webhookStatus(wh.ID) == "disabled" })
	ds := deliveriesOf(t, w, wh.ID)
	if len(ds) != 2 {
		t.Fatalf("%d deliveries, want 2", len(ds))
	}
	for _, d := range ds {
		if d.Status != StatusFailed || d.Attempts != 1 || !strings.Contains(d.LastError, "410 Gone") {
			t.Errorf("delivery %s: %s, %d attempts, %q; want failed after its one attempt, answered 410", d.ID, d.Status, d.Attempts, d.LastError)
		}
	}
}

func TestGoneDisablesTheWebhook(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, func(int) (int, time.Duration) { return http.StatusGone, 0 })
	wh := w.register(rv.URL, "contact.created")
	other := newReceiver(t, nil)
	w.register(other.URL, "contact.created")
	cfg, clock := clockedConfig()
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "a@example.com")
	waitFor(t, "the webhook disabled", func() bool { return w.webhookStatus(wh.ID) == "disabled" })
	ds := deliveriesOf(t, w, wh.ID)
	if len(ds) != 1 || ds[0].Status != StatusFailed || ds[0].Attempts != 1 || !strings.Contains(ds[0].LastError, "410 Gone") {
		t.Errorf("deliveries %+v", ds)
	}
	// Nothing more is built or sent: a disabled webhook gets no loop. The
	// reconcile here is the one Run makes after every log change, made
	// now so that its outcome can be checked.
	w.startSession(agent, "b@example.com")
	w.m.reconcile()
	if w.hasLoop(wh.ID) {
		t.Fatal("the disabled webhook has a delivery loop")
	}
	clock.Advance(24 * time.Hour)
	waitFor(t, "the other webhook's two events", func() bool { return other.count() == 2 })
	if rv.count() != 1 {
		t.Fatalf("%d requests after 410, want none after the first", rv.count()-1)
	}
	// A delivery is stored before it is sent: the log shows none for b,
	// and keeps the one it had.
	if ds := deliveriesOf(t, w, wh.ID); len(ds) != 1 {
		t.Errorf("attempt log after disabling: %d deliveries, want 1", len(ds))
	}
}

func TestDeleteCancelsTheAttemptInFlight(t *testing.T) {
	w := openWorld(t, "")
	started := make(chan struct{}, 1)
	rv := newReceiver(t, func(int) (int, time.Duration) {
		select {
		case started <- struct{}{}:
		default:
		}
		return 200, 10 * time.Second
	})
	wh := w.register(rv.URL, "contact.created")
	cfg, _ := clockedConfig()
	cfg.Timeout = time.Minute // only the delete can end the attempt within the test
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	recv(t, started, "the attempt to reach the receiver")
	if err := w.state.DeleteWebhook(t.Context(), w.pr, wh.ID); err != nil {
		t.Fatal(err)
	}
	// The receiver sees the sender give up on the request in flight.
	waitFor(t, "the attempt in flight to be cancelled", func() bool {
		rv.mu.Lock()
		defer rv.mu.Unlock()
		return rv.cancelled == 1
	})
	if rv.count() != 1 {
		t.Errorf("%d requests, want the one in flight only", rv.count())
	}
}

// openBreaker starts breakerFailures sessions of agent, each a new
// contact, and waits, moving clock, until webhook wh's failing receiver
// has failed an attempt of each: its breaker is then open.
func (w *world) openBreaker(t *testing.T, clock *manualClock, agent, wh string) {
	t.Helper()
	for i := range breakerFailures {
		w.startSession(agent, fmt.Sprintf("first%d@example.com", i))
	}
	waitAdvancing(t, clock, time.Second, "a failed attempt of each of the first deliveries recorded", func() bool {
		ds := deliveriesOf(t, w, wh)
		for _, d := range ds {
			if d.Attempts == 0 {
				return false
			}
		}
		return len(ds) == breakerFailures
	})
}

func TestAFailingReceiverPausesNewDeliveriesUntilItRecovers(t *testing.T) {
	w := openWorld(t, "")
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.MaxRetries, cfg.Backoff = 50, time.Second
	w.start(cfg)
	agent := w.newAgent()
	w.openBreaker(t, clock, agent, wh.ID)
	for i := 0; i < 20; i++ {
		w.startSession(agent, fmt.Sprintf("p%d@example.com", i))
	}
	// The loop has now seen the 20 events and, paused, built nothing for
	// them (a delivery is stored before it is sent).
	w.throughLoop(wh.ID)
	if n := len(deliveriesOf(t, w, wh.ID)); n != breakerFailures {
		t.Fatalf("%d deliveries built while the receiver fails, want the first %d only", n, breakerFailures)
	}
	healthy.Store(true)
	waitAdvancing(t, clock, time.Second, "all delivered", deliveriesAre(t, w, wh.ID, 20+breakerFailures, succeeded))
}

// A test asked for while the breaker is open is sent at once, alone, not
// after a failing delivery's next retry nor after the events held back: it
// checks a receiver just repaired, and its success closes the breaker, so
// the events held back follow. A test stays sent once: the cursor passing
// its record later builds it no more.
func TestATestIsSentWhileTheBreakerIsOpen(t *testing.T) {
	w := openWorld(t, "")
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.MaxRetries, cfg.Backoff = 50, time.Hour // no retry falls due unless the clock moves an hour
	w.start(cfg)
	agent := w.newAgent()
	w.openBreaker(t, clock, agent, wh.ID)
	const held = 5
	for i := range held {
		w.startSession(agent, fmt.Sprintf("held%d@example.com", i))
	}
	w.throughLoop(wh.ID)
	if n := len(deliveriesOf(t, w, wh.ID)); n != breakerFailures {
		t.Fatalf("%d deliveries built while the receiver fails, want the first %d only", n, breakerFailures)
	}
	healthy.Store(true)
	v, err := w.m.SendTest(t.Context(), w.pr, wh.ID, "repaired?", nil)
	if err != nil {
		t.Fatal(err)
	}
	test := v.(Delivery)
	waitFor(t, "the test delivered, the clock unmoved", func() bool {
		d, err := w.m.Delivery(wh.ID, test.ID)
		return err == nil && d.Status == StatusSucceeded
	})
	// It went out alone, ahead of the events held back: the receiver's
	// next request after the first deliveries' failed ones was the test.
	if got := rv.all(); len(got) <= breakerFailures || !bytes.Contains(got[breakerFailures].body, []byte(`"event":"webhook.test"`)) {
		t.Errorf("the receiver's request after the %d failed ones: want the test", breakerFailures)
	}
	waitFor(t, "the events held back delivered once the test closed the breaker", func() bool {
		ok := 0
		for _, d := range deliveriesOf(t, w, wh.ID) {
			if d.Status == StatusSucceeded && d.Event == "contact.created" {
				ok++
			}
		}
		return ok == held
	})
	w.throughLoop(wh.ID) // the cursor is past the test's record now
	tests := 0
	for _, r := range rv.all() {
		if bytes.Contains(r.body, []byte(`"event":"webhook.test"`)) {
			tests++
		}
	}
	if n := len(deliveriesOf(t, w, wh.ID)); n != breakerFailures+held+1 || tests != 1 {
		t.Errorf("%d deliveries and %d test requests once the cursor passed the test; want %d and 1", n, tests, breakerFailures+held+1)
	}
	for _, d := range deliveriesOf(t, w, wh.ID) {
		if strings.Contains(string(d.Body), "first") && (d.Status != StatusPending || d.Attempts != 1) {
			t.Errorf("a first delivery %s is %s after %d attempts; want pending until its retry falls due", d.ID, d.Status, d.Attempts)
		}
	}
}

// A receiver that refuses one event and takes the others: that event's
// retries never hold back the webhook's later events (the breaker counts
// failing deliveries, not attempts).
func TestOneEventsRetriesNeverHoldBackTheOthers(t *testing.T) {
	w := openWorld(t, "")
	var rv *receiver
	rv = newReceiver(t, func(n int) (int, time.Duration) {
		if bytes.Contains(rv.all()[n-1].body, []byte("poison@")) {
			return http.StatusInternalServerError, 0
		}
		return http.StatusOK, 0
	})
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.MaxRetries, cfg.Backoff, cfg.BackoffFactor = 50, time.Second, 1
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "poison@example.com")
	waitAdvancing(t, clock, time.Second, "the refused event's 5 failed attempts", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		return len(ds) == 1 && ds[0].Attempts >= 5
	})
	for i := range 5 {
		w.startSession(agent, fmt.Sprintf("later%d@example.com", i))
	}
	waitFor(t, "the 5 later events delivered while the refused one is still retried", func() bool {
		n := 0
		for _, d := range deliveriesOf(t, w, wh.ID) {
			if d.Status == StatusSucceeded {
				n++
			} else if d.Status != StatusPending {
				t.Fatalf("delivery %+v, want the refused one pending", d)
			}
		}
		return n == 5
	})
}

func TestADeadReceiverNeverSlowsAHealthyWebhook(t *testing.T) {
	w := openWorld(t, "")
	dead := newHoldingReceiver(t)
	healthy := newReceiver(t, nil)
	deadWh := w.register(dead.URL, "contact.created")
	w.register(healthy.URL, "contact.created")
	cfg, _ := clockedConfig()
	cfg.Concurrency, cfg.Timeout = 2, time.Hour // the dead receiver's attempts outlive the test
	w.start(cfg)
	agent := w.newAgent()
	w.sessions(t, agent, 0, 2)
	waitFor(t, "the dead receiver to hold both of its webhook's slots", func() bool { return dead.held.Load() == 2 })
	const n = 200
	w.sessions(t, agent, 2, n)
	waitFor(t, "the healthy webhook's 202 events", func() bool { return healthy.count() == n+2 })
	// All that while, the dead receiver held the attempts it got first, and
	// no outcome of them was recorded.
	if held, answered := dead.held.Load(), dead.answered.Load(); held != 2 || answered != 0 {
		t.Errorf("the dead receiver got %d requests and answered %d; want 2 held", held, answered)
	}
	for _, d := range deliveriesOf(t, w, deadWh.ID) {
		if d.Attempts != 0 || d.Status != StatusPending {
			t.Errorf("dead webhook's delivery %s: %d attempts, %s; want its first attempt still in flight", d.ID, d.Attempts, d.Status)
		}
	}
}

func TestAttemptLogPages(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created")
	w.start(testConfig())
	agent := w.newAgent()
	for i := 0; i < 5; i++ {
		w.startSession(agent, fmt.Sprintf("p%d@example.com", i))
	}
	waitFor(t, "5 deliveries", func() bool { return len(deliveriesOf(t, w, wh.ID)) == 5 })
	all := deliveriesOf(t, w, wh.ID)
	for i := 1; i < len(all); i++ {
		if all[i-1].ID <= all[i].ID {
			t.Fatalf("not most recent first: %s before %s", all[i-1].ID, all[i].ID)
		}
	}
	page, more, err := w.m.Deliveries(wh.ID, 2, "")
	if err != nil || !more || len(page) != 2 || page[0].ID != all[0].ID || page[1].ID != all[1].ID {
		t.Fatalf("first page %v more %v err %v", page, more, err)
	}
	page, more, err = w.m.Deliveries(wh.ID, 2, all[3].ID)
	if err != nil || more || len(page) != 1 || page[0].ID != all[4].ID {
		t.Fatalf("last page %v more %v err %v", page, more, err)
	}
}

// deliveriesAre reports whether the webhook has exactly n deliveries, each
// as want says.
func deliveriesAre(t *testing.T, w *world, wh string, n int, want func(Delivery) bool) func() bool {
	return func() bool {
		ds := deliveriesOf(t, w, wh)
		if len(ds) != n {
			return false
		}
		for _, d := range ds {
			if !want(d) {
				return false
			}
		}
		return true
	}
}

func succeeded(d Delivery) bool { return d.Status == StatusSucceeded }

// pendingAfterOneAttempt reports whether the webhook has exactly n
// deliveries, each pending after one attempt.
func pendingAfterOneAttempt(t *testing.T, w *world, wh string, n int) func() bool {
	return deliveriesAre(t, w, wh, n, func(d Delivery) bool { return d.Attempts == 1 && d.Status == StatusPending })
}

// TestAnEventIsSentByTheSubscriptionInForceWhenItHappened changes a
// webhook's events while its loop is stopped and behind the log, then
// restarts it (from a snapshot, which must keep the earlier lists): an
// event recorded before a change is judged by the list before it, in both
// directions.
func TestAnEventIsSentByTheSubscriptionInForceWhenItHappened(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir)
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "lead.hot")
	agent := w.newAgent()
	cfg := testConfig()
	events := func(list ...string) {
		t.Helper()
		if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, projections.WebhookPatch{Events: list}); err != nil {
			t.Fatal(err)
		}
	}
	restart := func() {
		t.Helper()
		w.close()
		w = openWorld(t, dir)
		w.start(cfg)
	}
	sentTo := func(want ...string) {
		t.Helper()
		var got []string
		waitFor(t, fmt.Sprintf("%d deliveries", len(want)), func() bool {
			got = got[:0]
			for _, d := range deliveriesOf(t, w, wh.ID) {
				var body struct {
					Data struct{ Contact projections.ContactRef }
				}
				if err := json.Unmarshal(d.Body, &body); err != nil {
					t.Fatal(err)
				}
				got = append(got, body.Data.Contact.Email)
			}
			return len(got) >= len(want)
		})
		w.throughLoop(wh.ID) // and nothing more after them
		if ds := deliveriesOf(t, w, wh.ID); len(ds) != len(want) {
			t.Fatalf("%d deliveries, want %d: %v", len(ds), len(want), want)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("delivered the contacts %v, want %v", got, want)
		}
	}

	// Read by the loop, matching nothing: its cursor moves in memory only.
	w.start(cfg)
	w.startSession(agent, "before-1@example.com")
	w.startSession(agent, "before-2@example.com")
	w.throughLoop(wh.ID)
	w.stop()
	w.stop = nil
	events("contact.created", "lead.hot")
	w.startSession(agent, "after-1@example.com")
	restart()
	sentTo("after-1@example.com")

	// Subscribed when they happened, read after the list dropped them.
	w.stop()
	w.stop = nil
	w.startSession(agent, "subscribed-1@example.com")
	w.startSession(agent, "subscribed-2@example.com")
	events("lead.hot")
	w.startSession(agent, "dropped@example.com")
	restart()
	sentTo("after-1@example.com", "subscribed-1@example.com", "subscribed-2@example.com")
}

// TestALoopReadsOnlyItsAccountsRecords: a webhook of an account that is
// quiet while another writes thousands of records is sent exactly its
// account's events once it writes, in order, and its lag comes back to
// zero; the other account's webhook gets none of the quiet one's.
func TestALoopReadsOnlyItsAccountsRecords(t *testing.T) {
	w := openWorld(t, "")
	busyRv, quietRv := newReceiver(t, nil), newReceiver(t, nil)
	w.register(busyRv.URL, "contact.created")
	acc, err := w.state.CreateAccount(t.Context(), "cli", "Quiet", projections.PlanPro, 0)
	if err != nil {
		t.Fatal(err)
	}
	other := &world{t: t, dir: w.dir, store: w.store, log: w.log, state: w.state, pr: projections.Principal{Account: acc, KeyID: "key_test"}}
	quiet := other.register(quietRv.URL, "contact.created")
	quietAgent := other.newAgent()
	w.start(testConfig())
	w.sessions(t, w.newAgent(), 0, 2_000)
	for i := range 3 {
		other.startSession(quietAgent, fmt.Sprintf("quiet%d@example.com", i))
	}
	waitFor(t, "the quiet account's 3 events delivered", func() bool { return allStatus(t, w, quiet.ID, 3, StatusSucceeded) })
	waitFor(t, "the busy account's 2,000 events delivered", func() bool { return busyRv.count() >= 2_000 })
	w.throughLoop(quiet.ID)
	var got []string
	for _, r := range quietRv.all() {
		var body struct {
			Data struct{ Contact projections.ContactRef }
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		got = append(got, body.Data.Contact.Email)
	}
	if slices.Sort(got); fmt.Sprint(got) != "[quiet0@example.com quiet1@example.com quiet2@example.com]" {
		t.Errorf("the quiet webhook was sent %v", got)
	}
	for _, r := range busyRv.all() {
		if bytes.Contains(r.body, []byte("quiet")) {
			t.Errorf("the busy webhook got the quiet account's event: %s", r.body)
		}
	}
	w.m.metrics.mu.Lock()
	lag := w.m.metrics.lags[quiet.ID]
	w.m.metrics.mu.Unlock()
	if lag != 0 {
		t.Errorf("the quiet webhook's lag is %d, want 0", lag)
	}
}

// TestALoopsLagGrowsWhileItIsPaused: a loop paused by a failing receiver
// reads nothing, and its lag counts the records of its account that pile
// up meanwhile; a new loop reports its lag from the start.
func TestALoopsLagGrowsWhileItIsPaused(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, func(int) (int, time.Duration) { return http.StatusInternalServerError, 0 })
	wh := w.register(rv.URL, "contact.created")
	cfg, _ := clockedConfig()
	cfg.Backoff = time.Hour // the failed deliveries stay pending
	lag := func() (uint64, bool) {
		w.m.metrics.mu.Lock()
		defer w.m.metrics.mu.Unlock()
		n, ok := w.m.metrics.lags[wh.ID]
		return n, ok
	}
	w.start(cfg)
	waitFor(t, "the new loop's lag", func() bool { _, ok := lag(); return ok })
	agent := w.newAgent()
	for i := range breakerFailures {
		w.startSession(agent, fmt.Sprintf("a%d@example.com", i))
	}
	waitFor(t, "three failed attempts", func() bool { return rv.count() >= breakerFailures })
	w.sessions(t, agent, 100, 20)
	waitFor(t, "the paused loop's lag at 20 or more", func() bool { n, _ := lag(); return n >= 20 })
}

// TestFanOutWakesTheLoopsOfTheAccountsWithRecords, by the state's index
// (fewer accounts with loops than records in the range) and by reading
// the log (more).
func TestFanOutWakesTheLoopsOfTheAccountsWithRecords(t *testing.T) {
	w := openWorld(t, "")
	dp := New(w.log, w.state, testConfig(), nil)
	loops := map[string]*loop{}
	var worlds []*world
	for i := range 3 {
		acc := w.pr.Account
		if i > 0 {
			a, err := w.state.CreateAccount(t.Context(), "cli", fmt.Sprint("Tenant ", i), projections.PlanPro, 0)
			if err != nil {
				t.Fatal(err)
			}
			acc = a
		}
		aw := &world{t: t, dir: w.dir, store: w.store, log: w.log, state: w.state, pr: projections.Principal{Account: acc, KeyID: "key_test"}}
		worlds = append(worlds, aw)
		l := newLoop(dp, projections.Target{ID: fmt.Sprint("wh_", i), Account: acc.ID})
		loops[acc.ID] = l
		dp.byAccount[acc.ID] = []*loop{l}
	}
	woken := func() []int {
		var out []int
		for i, aw := range worlds {
			select {
			case <-loops[aw.pr.Account.ID].wake:
				out = append(out, i)
			default:
			}
		}
		return out
	}
	for _, c := range []struct {
		name    string
		records func() // in the accounts woken
		want    string
	}{
		{"one record (the log)", func() { worlds[1].newAgent() }, "[1]"},
		{"two records (the log)", func() { worlds[0].newAgent(); worlds[2].newAgent() }, "[0 2]"},
		{"four records (the index)", func() {
			for range 4 {
				worlds[2].newAgent()
			}
		}, "[2]"},
		{"six records (the index)", func() {
			for range 3 {
				worlds[0].newAgent()
				worlds[1].newAgent()
			}
		}, "[0 1]"},
	} {
		from := w.log.DurableSeq()
		c.records()
		if err := dp.fanOut(from, w.log.DurableSeq()); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(woken()); got != c.want {
			t.Errorf("%s: woke the loops of accounts %s, want %s", c.name, got, c.want)
		}
	}
}

// Disabling a webhook stops its loop as a shutdown does: an attempt in
// flight ends and is recorded, an answer already received is stored (it
// was held for the next batch of outcomes), and nothing is sent again when
// the webhook is enabled. Cancelled, the loop lost both, and they went out
// again as first attempts.
func TestDisablingAWebhookKeepsTheAnswersItGot(t *testing.T) {
	w := openWorld(t, "")
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	var rv *receiver
	rv = newReceiver(t, func(n int) (int, time.Duration) {
		if bytes.Contains(rv.all()[n-1].body, []byte("slow@")) {
			held <- struct{}{}
			<-release
		}
		return http.StatusOK, 0
	})
	wh := w.register(rv.URL, "contact.created")
	cfg, _ := clockedConfig() // the outcome batch's 20 ms hold never passes: fast's answer waits for slow's
	cfg.Timeout = time.Minute
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "slow@example.com")
	recv(t, held, "the slow delivery in flight")
	w.startSession(agent, "fast@example.com")
	waitFor(t, "the fast delivery answered", func() bool { return rv.count() == 2 })
	if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, projections.WebhookPatch{Status: ptr("disabled")}); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, "both deliveries stored as succeeded on their first attempt", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		return len(ds) == 2 && ds[0].Status == StatusSucceeded && ds[0].Attempts == 1 && ds[1].Status == StatusSucceeded && ds[1].Attempts == 1
	})
	if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, projections.WebhookPatch{Status: ptr("enabled")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loop back", func() bool { return w.hasLoop(wh.ID) })
	w.throughLoop(wh.ID)
	if n := rv.count(); n != 2 {
		t.Errorf("the receiver got %d requests once the webhook was enabled again; want the 2 it had answered", n)
	}
}

// sendersOf counts the goroutines making l's attempts (loop.sender).
func sendersOf(l *loop) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), fmt.Sprintf("delivery.(*loop).sender(%p", l))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A loop's attempts are made by senders kept from one attempt to the
// next, as many as its attempts in flight; one left idle for senderIdle
// ends, and every one ends with its loop.
func TestSendersAreKeptWhileThereIsWorkAndEndWithoutIt(t *testing.T) {
	w := openWorld(t, "")
	var inFlight, most atomic.Int64
	rv := newReceiver(t, func(int) (int, time.Duration) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return 200, 0
	})
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.Concurrency = 3
	w.start(cfg)
	agent := w.newAgent()
	w.sessions(t, agent, 0, 60)
	waitFor(t, "60 deliveries", deliveriesAre(t, w, wh.ID, 60, succeeded))
	if most.Load() > 3 {
		t.Errorf("%d attempts at once, over delivery.concurrency 3", most.Load())
	}
	w.m.mu.Lock()
	l := w.m.loops[wh.ID]
	w.m.mu.Unlock()
	if n := sendersOf(l); n == 0 || n > 2*cfg.Concurrency {
		t.Errorf("%d senders after 60 attempts at concurrency 3, want 1 to 6 kept", n)
	}

	clock.Advance(senderIdle)
	waitFor(t, "the idle senders to end", func() bool { return sendersOf(l) == 0 })
	w.startSession(agent, "after@example.com")
	waitFor(t, "a delivery after they ended", deliveriesAre(t, w, wh.ID, 61, succeeded))
	if n := sendersOf(l); n != 1 {
		t.Errorf("%d senders after one attempt, want 1", n)
	}
	if err := w.state.DeleteWebhook(t.Context(), w.pr, wh.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loop's senders to end with it", func() bool { return sendersOf(l) == 0 })
}
