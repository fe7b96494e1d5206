package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"demosvc/eventlog"
	"demosvc/projections"
)

// Webhook operations with real receivers on 127.0.0.1 and the manual
// clock: rotation with overlap, pause and resume, recover, replay, test
// events, auto-disable, throttle and retention.

// verifyingReceiver checks every delivery it gets the way a receiver
// does: Standard Webhooks with the public library, and the seed's
// X-Service-Signature HMAC, each with the secret it holds at that moment.
// It answers 400 to a delivery that does not verify.
type verifyingReceiver struct {
	*httptest.Server
	mu                    sync.Mutex
	stdSecret, seedSecret string
	ok, rejected          int
	why                   []string
	sigs                  []string // webhook-signature of each delivery
}

func newVerifyingReceiver(t *testing.T, secret string) *verifyingReceiver {
	rv := &verifyingReceiver{stdSecret: secret, seedSecret: secret}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rv.mu.Lock()
		defer rv.mu.Unlock()
		rv.sigs = append(rv.sigs, r.Header.Get("webhook-signature"))
		var problems []string
		wh, err := standardwebhooks.NewWebhook(rv.stdSecret)
		if err == nil {
			// The manual clock runs ahead of real time: the timestamp
			// tolerance is not what this checks.
			err = wh.VerifyIgnoringTimestamp(body, r.Header)
		}
		if err != nil {
			problems = append(problems, "standard webhooks: "+err.Error())
		}
		if got := r.Header.Get("X-Service-Signature"); !hmac.Equal([]byte(got), []byte(Signature(rv.seedSecret, body))) {
			problems = append(problems, "X-Service-Signature does not verify with the seed's HMAC")
		}
		if len(problems) > 0 {
			rv.rejected++
			rv.why = append(rv.why, strings.Join(problems, "; "))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rv.ok++
	}))
	t.Cleanup(rv.Close)
	return rv
}

func (rv *verifyingReceiver) counts() (ok, rejected int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.ok, rv.rejected
}

func TestRotationWithOverlap(t *testing.T) {
	w := openWorld(t, "")
	rv := newVerifyingReceiver(t, "")
	wh := w.register(rv.URL, "contact.created")
	rv.stdSecret, rv.seedSecret = wh.Secret, wh.Secret
	cfg, clock := clockedConfig()
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "before@example.com")
	waitFor(t, "the first delivery", func() bool { ok, rej := rv.counts(); return ok+rej == 1 })

	v, err := w.state.RotateWebhookSecret(t.Context(), w.pr, wh.ID, 3600, nil)
	if err != nil {
		t.Fatal(err)
	}
	rotated := v.(projections.WebhookView)
	if rotated.Secret == "" || rotated.Secret == wh.Secret || rotated.PreviousSecretExpiresAt == "" {
		t.Fatalf("rotation answered %+v", rotated)
	}
	if got, _ := w.state.Webhook(w.pr.Account.ID, wh.ID); got.Secret != "" {
		t.Fatalf("a read shows the secret")
	}

	// In the overlap, before the receiver switches: it still verifies
	// with the old secret both ways.
	w.startSession(agent, "overlap1@example.com")
	waitFor(t, "the second delivery", func() bool { ok, rej := rv.counts(); return ok+rej == 2 })
	// The receiver switches its Standard Webhooks secret in the middle of
	// the overlap; its seed check keeps the old one until the overlap ends.
	rv.mu.Lock()
	rv.stdSecret = rotated.Secret
	rv.mu.Unlock()
	w.startSession(agent, "overlap2@example.com")
	waitFor(t, "the third delivery", func() bool { ok, rej := rv.counts(); return ok+rej == 3 })

	// After the overlap only the new secret signs; the seed receiver has
	// switched too.
	clock.Advance(2 * time.Hour)
	rv.mu.Lock()
	rv.seedSecret = rotated.Secret
	rv.mu.Unlock()
	w.startSession(agent, "after@example.com")
	waitFor(t, "the fourth delivery", func() bool { ok, rej := rv.counts(); return ok+rej == 4 })

	ok, rejected := rv.counts()
	if rejected != 0 || ok != 4 {
		t.Fatalf("receiver verified %d, rejected %d: %v", ok, rejected, rv.why)
	}
	rv.mu.Lock()
	sigs := append([]string(nil), rv.sigs...)
	rv.mu.Unlock()
	for i, want := range []int{1, 2, 2, 1} {
		if n := len(strings.Fields(sigs[i])); n != want {
			t.Errorf("delivery %d: webhook-signature %q has %d signatures, want %d", i+1, sigs[i], n, want)
		}
	}

	t.Run("rotating again during an overlap ends the older secret", func(t *testing.T) {
		v1, err := w.state.RotateWebhookSecret(t.Context(), w.pr, wh.ID, 3600, nil)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := w.state.RotateWebhookSecret(t.Context(), w.pr, wh.ID, 3600, nil)
		if err != nil {
			t.Fatal(err)
		}
		tg, _ := w.state.WebhookTarget(wh.ID)
		if tg.Secret != v2.(projections.WebhookView).Secret || tg.PreviousSecret != v1.(projections.WebhookView).Secret {
			t.Errorf("after two rotations: current and previous are not the last two secrets")
		}
	})
	t.Run("the log holds no secret in plaintext", func(t *testing.T) {
		for _, s := range []string{wh.Secret, rotated.Secret} {
			if logHolds(t, w, s) {
				t.Errorf("the store holds a secret in plaintext")
			}
		}
	})
}

// logHolds reports whether any record of the log carries s in its bytes.
func logHolds(t *testing.T, w *world, s string) bool {
	t.Helper()
	found := false
	err := w.log.Read(1, 0, func(rec *eventlog.Record) error {
		if strings.Contains(string(rec.Payload), s) {
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestPauseAndResume(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created")
	cfg, _ := clockedConfig()
	w.start(cfg)
	agent := w.newAgent()
	patch := func(in projections.WebhookPatch) projections.WebhookView {
		t.Helper()
		v, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	emails := func() []string { return contactEmails(rv) }

	v := patch(projections.WebhookPatch{Status: ptr("disabled")})
	if v.Status != "disabled" || v.DisabledReason != projections.DisabledManual || v.DisabledAt == "" {
		t.Fatalf("after PATCH disabled: %+v", v)
	}
	waitFor(t, "the loop to stop", func() bool { return !w.hasLoop(wh.ID) })
	w.startSession(agent, "while-off-1@example.com")
	w.startSession(agent, "while-off-2@example.com")

	v = patch(projections.WebhookPatch{Status: ptr("enabled")})
	if v.Status != "enabled" || v.DisabledReason != "" || v.DisabledAt != "" {
		t.Fatalf("after PATCH enabled: %+v", v)
	}
	waitFor(t, "the backlog", func() bool { return rv.count() == 2 })
	// Attempts run side by side: the order of arrival is not the point.
	if got := fmt.Sprint(sorted(emails())); got != "[while-off-1@example.com while-off-2@example.com]" {
		t.Errorf("resumed with %s, want the two events recorded while disabled", got)
	}

	t.Run("skip_backlog skips what came while disabled", func(t *testing.T) {
		patch(projections.WebhookPatch{Status: ptr("disabled")})
		waitFor(t, "the loop to stop", func() bool { return !w.hasLoop(wh.ID) })
		skipped := w.startSession(agent, "skipped@example.com")
		patch(projections.WebhookPatch{Status: ptr("enabled"), SkipBacklog: true})
		w.startSession(agent, "after-skip@example.com")
		waitFor(t, "the event after the skip", func() bool { return rv.count() == 3 })
		if got := emails()[2]; got != "after-skip@example.com" {
			t.Errorf("after the skip the receiver got %s", got)
		}
		// Deliveries are built in log order: had the skipped event been
		// taken, its delivery would be in the attempt log by now.
		for _, d := range deliveriesOf(t, w, wh.ID) {
			if strings.Contains(string(d.Body), skipped.ContactID) {
				t.Errorf("the skipped event has delivery %s", d.ID)
			}
		}
	})

	t.Run("PATCH changes url and events for what is sent next", func(t *testing.T) {
		other := newReceiver(t, nil)
		patch(projections.WebhookPatch{URL: ptr(other.URL), Events: []string{"contact.created", "demo.abandoned"}})
		s := w.startSession(agent, "moved@example.com")
		must := func(_ any, err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(w.state.AbandonSession(t.Context(), w.pr, s.ID, projections.Figures{}, nil))
		waitFor(t, "both events at the new URL", func() bool { return other.count() == 2 })
		if rv.count() != 3 {
			t.Errorf("the old URL got %d deliveries, want the 3 from before", rv.count())
		}
	})
}

// skip_backlog skips only what came while the webhook was disabled: what
// came before, recorded while it was enabled and not sent yet (a loop
// behind, its breaker open, the process stopped), is still sent, and so
// is what comes after. Here the dispatcher starts after all of it, with
// every event behind its cursor; a running loop judges the records by the
// same target (Target.Subscribed), whether or not it saw the webhook
// disabled in between.
func TestSkipBacklogSkipsOnlyWhatCameWhileDisabled(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	patch := func(in projections.WebhookPatch) {
		t.Helper()
		if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, in); err != nil {
			t.Fatal(err)
		}
	}
	w.startSession(agent, "before-1@example.com")
	w.startSession(agent, "before-2@example.com")
	patch(projections.WebhookPatch{Status: ptr("disabled")})
	skipped := w.startSession(agent, "while-off@example.com")
	patch(projections.WebhookPatch{Status: ptr("enabled"), SkipBacklog: true})
	w.startSession(agent, "after@example.com")
	patch(projections.WebhookPatch{Status: ptr("disabled")})
	w.startSession(agent, "while-off-not-skipped@example.com")
	patch(projections.WebhookPatch{Status: ptr("enabled")})

	cfg, _ := clockedConfig()
	w.start(cfg)
	waitFor(t, "four deliveries", func() bool { return rv.count() >= 4 })
	w.throughLoop(wh.ID)
	got := contactEmails(rv)
	want := "[after@example.com before-1@example.com before-2@example.com while-off-not-skipped@example.com]"
	if fmt.Sprint(sorted(got)) != want {
		t.Errorf("delivered %v, want %s", sorted(got), want)
	}
	for _, d := range deliveriesOf(t, w, wh.ID) {
		if strings.Contains(string(d.Body), skipped.ContactID) {
			t.Errorf("the event recorded while disabled, then skipped, has delivery %s", d.ID)
		}
	}
}

// A running loop that has not yet been stopped for a disable collects
// nothing past it: the records just after a webhook.disabled are judged
// by the target the enabling makes, so a window skip_backlog skips has no
// delivery, however the writes and the loop interleave (it had a few in
// each run: the loop judged them by its old target).
func TestSkipBacklogHoldsAgainstARunningLoop(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created")
	w.start(testConfig())
	agent := w.newAgent()
	var created atomic.Int64
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for g := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := w.state.StartSession(context.Background(), w.pr, projections.SessionInput{AgentID: agent,
					Contact: &projections.Contact{Name: "Pat", Email: fmt.Sprintf("w%d-%d@example.com", g, i), Company: "Globex"}}, nil); err != nil {
					t.Error(err)
					return
				}
				created.Add(1)
			}
		}()
	}
	patch := func(in projections.WebhookPatch) {
		t.Helper()
		if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, in); err != nil {
			t.Fatal(err)
		}
	}
	more := func(n int64) { // polls: some writes land between two toggles
		target := created.Load() + n
		waitFor(t, "more sessions", func() bool { return created.Load() >= target })
	}
	for range 6 {
		more(20)
		patch(projections.WebhookPatch{Status: ptr("disabled")})
		more(20)
		patch(projections.WebhookPatch{Status: ptr("enabled"), SkipBacklog: true})
	}
	close(stop)
	writers.Wait()
	w.throughLoop(wh.ID)

	var windows [][2]uint64
	var disabled uint64
	if err := w.log.Read(1, 0, func(rec *eventlog.Record) error {
		switch rec.Type {
		case projections.TypeWebhookDisabled:
			disabled = rec.Seq
		case projections.TypeWebhookEnabled:
			windows = append(windows, [2]uint64{disabled, rec.Seq})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(windows) != 6 {
		t.Fatalf("%d skipped windows in the log, want 6", len(windows))
	}
	ds, _, err := w.m.Deliveries(wh.ID, 100000, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		for _, win := range windows {
			if d.Seq > win[0] && d.Seq <= win[1] {
				t.Errorf("delivery %s of seq %d, in the window (%d, %d] skip_backlog skipped", d.ID, d.Seq, win[0], win[1])
			}
		}
	}
	if len(ds) == 0 {
		t.Errorf("no deliveries at all")
	}
}

// A stop with an attempt in flight waits for the attempt, records its
// outcome, and ends. (The hang drain had, an outcome held with no write in
// flight to take it, needs a sender's errWebhookGone to end the busy
// attempts last; TestSkipBacklogHoldsAgainstARunningLoop meets it, this
// test does not.)
func TestAStopWaitsForTheAttemptInFlightAndRecordsIt(t *testing.T) {
	w := openWorld(t, "")
	release := make(chan struct{})
	var held atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		held.Add(1)
		<-release
		rw.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	wh := w.register(srv.URL, "contact.created")
	w.start(testConfig())
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "the attempt in flight", func() bool { return held.Load() == 1 })
	stopped := make(chan struct{})
	go func() { w.stop(); close(stopped) }()
	waitFor(t, "the loop told to stop", func() bool {
		w.m.mu.Lock()
		defer w.m.mu.Unlock()
		l := w.m.loops[wh.ID]
		if l == nil {
			return true
		}
		select {
		case <-l.stopping:
			return true
		default:
			return false
		}
	})
	close(release)
	recv(t, stopped, "the dispatcher to stop once the attempt ended")
	ds := deliveriesOf(t, w, wh.ID)
	if len(ds) != 1 || ds[0].Status != StatusSucceeded {
		t.Errorf("after the stop: %+v; want the delivery recorded succeeded", ds)
	}
}

func TestRecoverAndReplay(t *testing.T) {
	w := openWorld(t, "")
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.MaxRetries = 0 // one attempt each: the outage fails them at once
	w.start(cfg)
	agent := w.newAgent()
	since := clock.Now().Add(-time.Second)
	for i := range 3 {
		w.startSession(agent, fmt.Sprintf("outage%d@example.com", i))
	}
	waitFor(t, "three failed deliveries", func() bool { return allStatus(t, w, wh.ID, 3, StatusFailed) })
	healthy.Store(true)
	w.startSession(agent, "healed@example.com")
	waitFor(t, "the delivery after the outage", func() bool { return countStatus(t, w, wh.ID, StatusSucceeded) == 1 })
	failed := map[string]bool{}
	for _, d := range deliveriesOf(t, w, wh.ID) {
		if d.Status == StatusFailed {
			failed[d.EventID] = true
		}
	}

	plan, err := w.m.PlanRecover(wh.ID, Window{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Answer.Queued != 3 || plan.Answer.More || len(plan.DeliveryIDs) != 3 {
		t.Fatalf("recover plan %+v, want the 3 failed", plan)
	}
	if _, err := w.state.RequestRedelivery(t.Context(), w.pr, wh.ID, projections.RedeliverRecover, plan.DeliveryIDs, nil, plan.Answer, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every delivery succeeded", func() bool { return allStatus(t, w, wh.ID, 4, StatusSucceeded) })
	// 3 failed + 1 healed + 3 re-sent: the healed one was not sent again.
	if rv.count() != 7 {
		t.Fatalf("receiver got %d requests, want 7", rv.count())
	}
	first := map[string][]byte{} // event id -> the body sent first
	for _, r := range rv.all()[:3] {
		first[r.header.Get("X-Service-Event-Id")] = r.body
	}
	for _, r := range rv.all()[4:] {
		id := r.header.Get("X-Service-Event-Id")
		if !failed[id] {
			t.Errorf("recover re-sent event %s, which had not failed", id)
		}
		if !bytes.Equal(r.body, first[id]) {
			t.Errorf("recover re-sent event %s with %q, not the body it sent first", id, r.body)
		}
	}

	t.Run("a second recover finds nothing", func(t *testing.T) {
		plan, err := w.m.PlanRecover(wh.ID, Window{Since: since})
		if err != nil || plan.Answer.Queued != 0 {
			t.Fatalf("plan %+v, %v", plan, err)
		}
	})

	t.Run("replay re-sends every event with the same event ids", func(t *testing.T) {
		tg, _ := w.state.WebhookTarget(wh.ID)
		plan, err := w.m.PlanReplay(tg, Window{Since: since.Add(-time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if plan.Answer.Queued != 4 || len(plan.Seqs) != 4 {
			t.Fatalf("replay plan %+v, want the 4 events", plan)
		}
		before := rv.count()
		if _, err := w.state.RequestRedelivery(t.Context(), w.pr, wh.ID, projections.RedeliverReplay, nil, plan.Seqs, plan.Answer, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the replayed deliveries", func() bool { return allStatus(t, w, wh.ID, 8, StatusSucceeded) })
		seen := map[string]int{}
		for _, r := range rv.all()[before:] {
			seen[r.header.Get("X-Service-Event-Id")]++
		}
		byEvent := map[string][]string{}
		for _, d := range deliveriesOf(t, w, wh.ID) {
			byEvent[d.EventID] = append(byEvent[d.EventID], d.ID)
		}
		if len(seen) != 4 {
			t.Errorf("replay sent %d distinct event ids, want 4", len(seen))
		}
		for ev, n := range seen {
			if n != 1 || len(byEvent[ev]) != 2 || byEvent[ev][0] == byEvent[ev][1] {
				t.Errorf("event %s: sent %d times by the replay, deliveries %v (want a new delivery beside the first)", ev, n, byEvent[ev])
			}
		}
	})

	t.Run("a bounded replay says more remain and continues after", func(t *testing.T) {
		tg, _ := w.state.WebhookTarget(wh.ID)
		all, err := w.m.PlanReplay(tg, Window{Since: since.Add(-time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		cut := all.Seqs[1]
		rest, err := w.m.PlanReplay(tg, Window{Since: since.Add(-time.Minute), After: fmt.Sprint(cut)})
		if err != nil || fmt.Sprint(rest.Seqs) != fmt.Sprint(all.Seqs[2:]) {
			t.Errorf("after %d: %v (%v), want %v", cut, rest.Seqs, err, all.Seqs[2:])
		}
	})

	t.Run("replay selects by the events the webhook is subscribed to now", func(t *testing.T) {
		if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, projections.WebhookPatch{Events: []string{"lead.hot"}}); err != nil {
			t.Fatal(err)
		}
		tg, _ := w.state.WebhookTarget(wh.ID)
		plan, err := w.m.PlanReplay(tg, Window{Since: since.Add(-time.Minute)})
		if err != nil || plan.Answer.Queued != 0 {
			t.Errorf("replay after unsubscribing from contact.created: %+v, %v; want nothing queued", plan, err)
		}
	})
}

// TestARecoverIsCarriedOutOnceEvenIfItQueuedNothing carries out a recover
// of a delivery that is pending again (waiting for its retry), then lets
// that retry fail and restarts: the request is not read again, so the
// delivery is not re-sent.
func TestARecoverIsCarriedOutOnceEvenIfItQueuedNothing(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir)
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.MaxRetries, cfg.Backoff = 1, time.Minute
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "the first attempt failed", pendingAfterOneAttempt(t, w, wh.ID, 1))
	d := deliveriesOf(t, w, wh.ID)[0]
	if _, err := w.state.RequestRedelivery(t.Context(), w.pr, wh.ID, projections.RedeliverRecover, []string{d.ID}, nil,
		projections.RedeliveryAnswer{Queued: 1}, nil); err != nil {
		t.Fatal(err)
	}
	w.throughLoop(wh.ID) // carried out: the delivery was pending, not failed
	waitAdvancing(t, clock, time.Minute, "the retry failed", func() bool { return allStatus(t, w, wh.ID, 1, StatusFailed) })
	sent := rv.count()

	w.close()
	w = openWorld(t, dir)
	w.start(cfg)
	healthy.Store(true)
	w.startSession(w.newAgent(), "b@example.com")
	waitFor(t, "the next event delivered", func() bool { return countStatus(t, w, wh.ID, StatusSucceeded) >= 1 })
	w.throughLoop(wh.ID)
	if got := rv.count() - sent; got != 1 {
		t.Errorf("the receiver got %d requests after the restart, want 1: the recover was carried out again", got)
	}
	if st := countStatus(t, w, wh.ID, StatusFailed); st != 1 {
		t.Errorf("%d failed deliveries after the restart, want the first still failed", st)
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

// contactEmails returns the contacts' e-mails of the contact.created
// events rv received, in the order received.
func contactEmails(rv *receiver) []string {
	var out []string
	for _, r := range rv.all() {
		var env struct {
			Data projections.ContactCreatedData `json:"data"`
		}
		json.Unmarshal(r.body, &env)
		out = append(out, env.Data.Contact.Email)
	}
	return out
}

// allStatus reports whether wh has n deliveries, all of status.
func allStatus(t *testing.T, w *world, wh string, n int, status string) bool {
	return len(deliveriesOf(t, w, wh)) == n && countStatus(t, w, wh, status) == n
}

func countStatus(t *testing.T, w *world, wh, status string) int {
	n := 0
	for _, d := range deliveriesOf(t, w, wh) {
		if d.Status == status {
			n++
		}
	}
	return n
}

func TestTestEventAndAttemptDetail(t *testing.T) {
	w := openWorld(t, "")
	big := strings.Repeat("x", 10_000)
	var mu sync.Mutex
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		rw.Header().Set("X-Receiver", "yes")
		rw.WriteHeader(http.StatusAccepted)
		io.WriteString(rw, big)
	}))
	t.Cleanup(srv.Close)
	wh := w.register(srv.URL, "lead.hot") // not subscribed to anything sent here
	cfg, _ := clockedConfig()
	w.start(cfg)
	v, err := w.m.SendTest(t.Context(), w.pr, wh.ID, "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	answered, _ := v.(Delivery)
	id := answered.ID
	if !strings.HasPrefix(id, PrefixDelivery) || answered.Status != StatusPending || answered.Event != "webhook.test" {
		t.Fatalf("answer %+v", v)
	}
	var d DeliveryDetail
	waitFor(t, "the test delivery succeeded", func() bool {
		d, err = w.m.Detail(wh.ID, id)
		return err == nil && d.Status == StatusSucceeded
	})
	if d.EventID != answered.EventID || d.CreatedAt != answered.CreatedAt {
		t.Errorf("stored %+v, answered %+v", d.Delivery, answered)
	}
	var env struct {
		Event string                      `json:"event"`
		Data  projections.WebhookTestData `json:"data"`
	}
	if err := json.Unmarshal(d.Body, &env); err != nil || env.Event != "webhook.test" || env.Data.WebhookID != wh.ID || env.Data.Message != "hello" {
		t.Errorf("body %s", d.Body)
	}
	if len(d.Log) != 1 {
		t.Fatalf("attempt log %+v, want 1 attempt", d.Log)
	}
	a := d.Log[0]
	if a.N != 1 || a.StatusCode != 202 || a.Error != "" || a.ResponseHeaders["X-Receiver"] != "yes" ||
		len(a.ResponseBody) != maxKeptBody || a.RequestHeaders["X-Service-Signature"] != Signature(wh.Secret, d.Body) ||
		!strings.HasPrefix(a.RequestHeaders["Webhook-Signature"], "v1,") || a.RequestHeaders["Webhook-Id"] != d.EventID ||
		a.RequestHeaders["X-Service-Event-Id"] != d.EventID || a.RequestHeaders["User-Agent"] != "demosvc/test" ||
		a.RequestHeaders["Content-Type"] != "application/json" || a.RequestHeaders["X-Service-Webhook-Id"] != wh.ID ||
		a.RequestHeaders["X-Service-Delivery-Attempt"] != "1" || a.RequestHeaders["Webhook-Timestamp"] == "" {
		t.Errorf("attempt %+v", a)
	}
	// The detail shows every header the receiver got, as it got it,
	// besides the body's length.
	mu.Lock()
	for k := range got {
		if k != "Content-Length" && a.RequestHeaders[k] != got.Get(k) {
			t.Errorf("request header %s: detail shows %q, the receiver got %q", k, a.RequestHeaders[k], got.Get(k))
		}
	}
	mu.Unlock()
	b, _ := json.Marshal(d)
	for _, want := range []string{`"attempt_log":[{"attempt":1,"started_at":"`, `"status_code":202,"error":null,"request_headers":{`, `"response_headers":{`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("detail JSON %s lacks %s", b, want)
		}
	}

	t.Run("a disabled webhook refuses a test", func(t *testing.T) {
		if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, projections.WebhookPatch{Status: ptr("disabled")}); err != nil {
			t.Fatal(err)
		}
		_, err := w.state.TestWebhook(t.Context(), w.pr, wh.ID, "", w.m.NewDeliveryID(), nil, func(*eventlog.Record) any { return nil })
		if e, ok := err.(*projections.Error); !ok || e.Code != projections.EInvalidState {
			t.Errorf("test of a disabled webhook: %v", err)
		}
	})
}

// An attempt in flight when the failures reach delivery.disable_after is
// waited for, and when it succeeds the webhook is not failing after all:
// it stays enabled, rather than disabled beside a delivery that succeeded.
func TestAnAttemptInFlightThatSucceedsKeepsTheWebhookEnabled(t *testing.T) {
	w := openWorld(t, "")
	release := make(chan struct{})
	var rv *receiver
	rv = newReceiver(t, func(n int) (int, time.Duration) {
		if bytes.Contains(rv.all()[n-1].body, []byte("late@")) {
			<-release
			return http.StatusOK, 0
		}
		return http.StatusInternalServerError, 0
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.MaxRetries, cfg.Concurrency = 0, 4
	cfg.DisableAfter = 5 * 24 * time.Hour
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "first@example.com")
	waitFor(t, "the first failure", func() bool { return allStatus(t, w, wh.ID, 1, StatusFailed) })
	clock.Advance(5 * 24 * time.Hour)
	w.startSession(agent, "late@example.com")
	waitFor(t, "the late attempt in flight", func() bool { return rv.count() == 2 })
	w.startSession(agent, "third@example.com")
	failed := w.m.metrics.attempts.WithLabelValues(string(verdictFailed))
	waitFor(t, "the third's failure taken by the loop", func() bool { return testutil.ToFloat64(failed) == 2 })
	close(release)
	waitFor(t, "the late delivery to succeed", func() bool {
		for _, d := range deliveriesOf(t, w, wh.ID) {
			if d.Status == StatusSucceeded {
				return true
			}
		}
		return false
	})
	w.startSession(agent, "fourth@example.com") // written after the outcomes: the loop has moved on
	waitFor(t, "the fourth attempt, or the webhook disabled", func() bool {
		v, _ := w.state.Webhook(w.pr.Account.ID, wh.ID)
		return rv.count() == 4 || v.Status == "disabled"
	})
	if v, _ := w.state.Webhook(w.pr.Account.ID, wh.ID); v.Status != "enabled" {
		t.Errorf("the webhook is %s (%s) though an attempt succeeded, want enabled", v.Status, v.DisabledReason)
	}
}

func TestFailingWebhookIsDisabledAndAnotherIsTold(t *testing.T) {
	w := openWorld(t, "")
	dead := newReceiver(t, func(int) (int, time.Duration) { return 500, 0 })
	ops := newReceiver(t, nil)
	failing := w.register(dead.URL, "contact.created")
	watcher := w.register(ops.URL, "webhook.disabled")
	cfg, clock := clockedConfig()
	cfg.MaxRetries = 0
	cfg.DisableAfter = 5 * 24 * time.Hour
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "first@example.com")
	waitFor(t, "the first failure", func() bool { return allStatus(t, w, failing.ID, 1, StatusFailed) })
	clock.Advance(4 * 24 * time.Hour)
	w.startSession(agent, "second@example.com")
	waitFor(t, "the second failure", func() bool { return allStatus(t, w, failing.ID, 2, StatusFailed) })
	if v, _ := w.state.Webhook(w.pr.Account.ID, failing.ID); v.Status != "enabled" {
		t.Fatalf("disabled after 4 days of failures: %+v", v)
	}
	clock.Advance(24 * time.Hour)
	w.startSession(agent, "third@example.com")
	waitFor(t, "the webhook disabled", func() bool {
		v, _ := w.state.Webhook(w.pr.Account.ID, failing.ID)
		return v.Status == "disabled"
	})
	v, _ := w.state.Webhook(w.pr.Account.ID, failing.ID)
	if v.DisabledReason != projections.DisabledFailing || v.DisabledAt == "" {
		t.Errorf("view %+v, want reason failing and disabled_at", v)
	}
	waitFor(t, "webhook.disabled at the other webhook", func() bool { return ops.count() == 1 })
	var env struct {
		Event string                        `json:"event"`
		Data  projections.WebhookStatusData `json:"data"`
	}
	json.Unmarshal(ops.all()[0].body, &env)
	if env.Event != "webhook.disabled" || env.Data.WebhookID != failing.ID || env.Data.Reason != projections.DisabledFailing {
		t.Errorf("the watcher got %s", ops.all()[0].body)
	}
	_ = watcher

	t.Run("enabled again, it starts a new count", func(t *testing.T) {
		if _, err := w.state.UpdateWebhook(t.Context(), w.pr, failing.ID, projections.WebhookPatch{Status: ptr("enabled"), SkipBacklog: true}); err != nil {
			t.Fatal(err)
		}
		before := countStatus(t, w, failing.ID, StatusFailed)
		w.startSession(agent, "fourth@example.com")
		waitFor(t, "a failure after enabling", func() bool { return countStatus(t, w, failing.ID, StatusFailed) == before+1 })
		w.throughLoop(failing.ID)
		if v, _ := w.state.Webhook(w.pr.Account.ID, failing.ID); v.Status != "enabled" {
			t.Errorf("disabled again at the first failure after enabling: %+v", v)
		}
	})

	t.Run("a success resets the failing mark", func(t *testing.T) {
		w := openWorld(t, "")
		rv, healthy := newSwitchableReceiver(t)
		wh := w.register(rv.URL, "contact.created")
		cfg, clock := clockedConfig()
		cfg.MaxRetries = 0
		cfg.DisableAfter = 5 * 24 * time.Hour
		w.start(cfg)
		agent := w.newAgent()
		w.startSession(agent, "a@example.com")
		waitFor(t, "a failure", func() bool { return allStatus(t, w, wh.ID, 1, StatusFailed) })
		healthy.Store(true)
		clock.Advance(3 * 24 * time.Hour)
		w.startSession(agent, "b@example.com")
		waitFor(t, "a success", func() bool { return countStatus(t, w, wh.ID, StatusSucceeded) == 1 })
		healthy.Store(false)
		clock.Advance(3 * 24 * time.Hour)
		w.startSession(agent, "c@example.com")
		waitFor(t, "another failure", func() bool { return countStatus(t, w, wh.ID, StatusFailed) == 2 })
		w.throughLoop(wh.ID)
		if v, _ := w.state.Webhook(w.pr.Account.ID, wh.ID); v.Status != "enabled" {
			t.Errorf("disabled though an attempt succeeded 3 days ago: %+v", v)
		}
	})
}

func TestThrottleHoldsTheRate(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	limit := 2
	v, err := w.state.RegisterWebhook(t.Context(), w.pr, projections.WebhookInput{URL: rv.URL, Events: []string{"contact.created"}, RateLimitPerSecond: &limit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wh := v.(projections.WebhookView)
	if wh.RateLimitPerSecond != 2 {
		t.Fatalf("view %+v", wh)
	}
	cfg, clock := clockedConfig()
	agent := w.newAgent()
	const n = 7
	for i := range n {
		w.startSession(agent, fmt.Sprintf("t%d@example.com", i))
	}
	w.start(cfg)
	// Each second of the clock lets two more through; the clock moves
	// only once the receiver has them, so their start times are that
	// second's.
	for sent := limit; ; sent += limit {
		want := min(sent, n)
		waitFor(t, fmt.Sprintf("%d deliveries", want), func() bool { return rv.count() >= want })
		if want == n {
			break
		}
		clock.Advance(time.Second)
	}
	waitFor(t, "all succeeded", func() bool { return allStatus(t, w, wh.ID, n, StatusSucceeded) })
	perSecond := map[int64]int{}
	for _, d := range deliveriesOf(t, w, wh.ID) {
		detail, err := w.m.Detail(wh.ID, d.ID)
		if err != nil || len(detail.Log) != 1 {
			t.Fatalf("detail %+v, %v", detail, err)
		}
		perSecond[detail.Log[0].StartedAt/1000]++
	}
	total := 0
	for sec, c := range perSecond {
		total += c
		if c > limit {
			t.Errorf("%d attempts started in second %d, limit %d", c, sec, limit)
		}
	}
	if total != n || rv.count() != n {
		t.Errorf("%d attempts, %d received, want %d: none dropped", total, rv.count(), n)
	}
}

func TestRetentionPrunes(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	live := w.register(rv.URL, "contact.created")
	idle := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.Retention = 30 * 24 * time.Hour
	w.start(cfg)
	agent := w.newAgent()
	for i := range 3 {
		w.startSession(agent, fmt.Sprintf("old%d@example.com", i))
	}
	waitFor(t, "old deliveries", func() bool {
		return allStatus(t, w, live.ID, 3, StatusSucceeded) && allStatus(t, w, idle.ID, 3, StatusSucceeded)
	})
	old := deliveriesOf(t, w, live.ID)
	if _, err := w.state.UpdateWebhook(t.Context(), w.pr, idle.ID, projections.WebhookPatch{Status: ptr("disabled")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle webhook's loop to stop", func() bool { return !w.hasLoop(idle.ID) })
	clock.Advance(31 * 24 * time.Hour)
	w.startSession(agent, "new@example.com")
	waitAdvancing(t, clock, time.Minute, "retention to remove the old deliveries", func() bool {
		ds := deliveriesOf(t, w, live.ID)
		return len(ds) == 1 && ds[0].Status == StatusSucceeded && len(deliveriesOf(t, w, idle.ID)) == 0
	})
	for _, d := range old {
		if log, err := w.m.store.attemptsOf(live.ID, d.ID); err != nil || len(log) != 0 {
			t.Errorf("delivery %s: attempts %v left (%v)", d.ID, log, err)
		}
		if byEvent, err := w.m.DeliveriesOfEvent(live.ID, d.Seq); err != nil || len(byEvent) != 0 {
			t.Errorf("seq %d: still indexed to %v (%v)", d.Seq, byEvent, err)
		}
		var indexed int
		_ = w.store.Scan(eventIndexKey(live.ID, d.Seq, ""), func(_, _ []byte) error { indexed++; return nil })
		if indexed != 0 {
			t.Errorf("seq %d: %d event index keys left", d.Seq, indexed)
		}
	}
	kept := deliveriesOf(t, w, live.ID)[0]
	if byEvent, err := w.m.DeliveriesOfEvent(live.ID, kept.Seq); err != nil || len(byEvent) != 1 {
		t.Errorf("the kept delivery %s: indexed to %v (%v), want itself", kept.ID, byEvent, err)
	}

	t.Run("one step removes at most pruneBatch", func(t *testing.T) {
		w := openWorld(t, "")
		store := deliveryStore{db: w.store, w: w.log}
		at := time.Now().Add(-48 * time.Hour)
		var ds []*Delivery
		for i := range pruneBatch + 44 {
			ds = append(ds, &Delivery{ID: idFloor(PrefixDelivery, at.Add(time.Duration(i)*time.Millisecond))[:len(PrefixDelivery)+10] + fmt.Sprintf("%016d", i),
				WebhookID: "wh_x", Status: StatusSucceeded, CreatedAt: at.Unix()})
		}
		if err := store.startPutWithCursor("wh_x", 1, ds)(); err != nil {
			t.Fatal(err)
		}
		cutoff := time.Now().Add(-24 * time.Hour)
		for i, want := range []struct {
			more bool
			left int
		}{{true, 44}, {false, 0}} {
			more, err := store.pruneStep("wh_x", cutoff, func(string) bool { return false })
			if err != nil {
				t.Fatal(err)
			}
			page, _, _ := store.page("wh_x", 1000, "")
			if more != want.more || len(page) != want.left {
				t.Errorf("step %d: more %v, %d left; want %v, %d", i+1, more, len(page), want.more, want.left)
			}
		}
	})

	t.Run("a test sent ahead of the cursor stays until the cursor passes it", func(t *testing.T) {
		w := openWorld(t, "")
		store := deliveryStore{db: w.store, w: w.log}
		at := time.Now().Add(-48 * time.Hour)
		id := func(i int) string {
			return idFloor(PrefixDelivery, at.Add(time.Duration(i)*time.Millisecond))[:len(PrefixDelivery)+10] + fmt.Sprintf("%016d", i)
		}
		behind := &Delivery{ID: id(0), WebhookID: "wh_x", Seq: 5, Status: StatusSucceeded, CreatedAt: at.Unix()}
		ahead := &Delivery{ID: id(1), WebhookID: "wh_x", Seq: 9, Event: "webhook.test", Status: StatusSucceeded, CreatedAt: at.Unix()}
		if err := store.startPutWithCursor("wh_x", 5, []*Delivery{behind})(); err != nil {
			t.Fatal(err)
		}
		if err := store.startPutFresh("wh_x", []*Delivery{ahead})(); err != nil {
			t.Fatal(err)
		}
		cutoff := time.Now().Add(-24 * time.Hour)
		if _, err := store.pruneStep("wh_x", cutoff, func(string) bool { return false }); err != nil {
			t.Fatal(err)
		}
		if page, _, _ := store.page("wh_x", 10, ""); len(page) != 1 || page[0].ID != ahead.ID {
			t.Fatalf("after a retention step: %v; want the test past the cursor alone", page)
		}
		if err := store.startPutWithCursor("wh_x", 9, nil)(); err != nil { // the cursor passes its event
			t.Fatal(err)
		}
		if _, err := store.pruneStep("wh_x", cutoff, func(string) bool { return false }); err != nil {
			t.Fatal(err)
		}
		if page, _, _ := store.page("wh_x", 10, ""); len(page) != 0 {
			t.Errorf("once the cursor passed it: %v left; want it removed", page)
		}
	})
}

// Retention removes a disabled webhook's old deliveries a step at a time,
// between the dispatcher's other work, and goes on at once while there are
// more: removing a large backlog in one go held up every other webhook's
// deliveries (and the cancellation of attempts on delete) until it was done.
func TestRetentionOfADisabledWebhookGoesAStepATurn(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	live := w.register(rv.URL, "contact.created")
	idle := w.register(rv.URL, "contact.created")
	if _, err := w.state.UpdateWebhook(t.Context(), w.pr, idle.ID, projections.WebhookPatch{Status: ptr("disabled")}); err != nil {
		t.Fatal(err)
	}
	store := deliveryStore{db: w.store, w: w.log}
	at := time.Now().Add(-48 * time.Hour)
	var ds []*Delivery
	for i := range 2*pruneBatch + 10 {
		ds = append(ds, &Delivery{ID: idFloor(PrefixDelivery, at.Add(time.Duration(i)*time.Millisecond))[:len(PrefixDelivery)+10] + fmt.Sprintf("%016d", i),
			WebhookID: idle.ID, Seq: 1, Status: StatusSucceeded, CreatedAt: at.Unix()})
	}
	if err := store.startPutWithCursor(idle.ID, 1, ds)(); err != nil {
		t.Fatal(err)
	}
	cfg, clock := clockedConfig()
	cfg.Retention = time.Hour
	w.start(cfg)
	left := func() int { page, _, _ := store.page(idle.ID, 1000, ""); return len(page) }

	if q := w.m.pruneIdleStep([]string{idle.ID, "wh_next"}); len(q) != 2 || q[0] != idle.ID || left() != pruneBatch+10 {
		t.Fatalf("one step: queue %v, %d left; want the same queue and %d left", q, left(), pruneBatch+10)
	}
	clock.Advance(pruneEvery)
	waitFor(t, "the rest removed, step after step", func() bool { return left() == 0 })
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "the live webhook's delivery", func() bool { return allStatus(t, w, live.ID, 1, StatusSucceeded) })
}

// A paused webhook's pending deliveries outlive the retention: enabled
// again, it is sent what it missed (retention removed them, and its
// cursor was past their events: they were never sent).
func TestRetentionKeepsAPausedWebhooksPendingDeliveries(t *testing.T) {
	w := openWorld(t, "")
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	cfg.MaxRetries = 5
	cfg.Retention = time.Hour
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "a retry pending", pendingAfterOneAttempt(t, w, wh.ID, 1))
	if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, projections.WebhookPatch{Status: ptr("disabled")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loop to stop", func() bool { return !w.hasLoop(wh.ID) })
	clock.Advance(2 * time.Hour)
	for q := []string{wh.ID}; len(q) > 0; {
		q = w.m.pruneIdleStep(q) // what the dispatcher runs for a webhook with no loop
	}
	if ds := deliveriesOf(t, w, wh.ID); len(ds) != 1 || ds[0].Status != StatusPending {
		t.Fatalf("after retention the paused webhook has %+v, want its pending delivery", ds)
	}
	healthy.Store(true)
	if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, projections.WebhookPatch{Status: ptr("enabled")}); err != nil {
		t.Fatal(err)
	}
	waitAdvancing(t, clock, time.Second, "the missed delivery sent once enabled", func() bool { return allStatus(t, w, wh.ID, 1, StatusSucceeded) })
}

// Deleting a disabled webhook, which has no loop to forget its delivery
// state when it ends, drops that state too: cursor, attempt log, attempt
// details (answers' headers and bodies) and counts. It was kept for ever.
func TestDeletingADisabledWebhookDropsItsDeliveryState(t *testing.T) {
	w, wh := deliveredOnce(t)
	if _, err := w.state.UpdateWebhook(t.Context(), w.pr, wh.ID, projections.WebhookPatch{Status: ptr("disabled")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loop to stop", func() bool { return !w.hasLoop(wh.ID) })
	keys := func() int {
		n := 0
		_ = w.store.Scan(webhookPrefix(wh.ID), func(_, _ []byte) error { n++; return nil })
		return n
	}
	if keys() == 0 {
		t.Fatal("the disabled webhook has no delivery state to drop")
	}
	if err := w.state.DeleteWebhook(t.Context(), w.pr, wh.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted webhook's delivery state dropped", func() bool { return keys() == 0 })
}

// TestStateOfAWebhookDeletedWhileNoDispatcherRanIsDroppedAtStart deletes
// a webhook while deliveries are stopped: the next start drops its state,
// and keeps a disabled webhook's.
func TestStateOfAWebhookDeletedWhileNoDispatcherRanIsDroppedAtStart(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	gone, paused := w.register(rv.URL, "contact.created"), w.register(rv.URL, "contact.created")
	w.start(testConfig())
	w.startSession(w.newAgent(), "a@example.com")
	for _, wh := range []string{gone.ID, paused.ID} {
		waitFor(t, "one delivery", func() bool { return allStatus(t, w, wh, 1, StatusSucceeded) })
	}
	w.stop()
	w.stop = nil
	if err := w.state.DeleteWebhook(t.Context(), w.pr, gone.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.state.UpdateWebhook(t.Context(), w.pr, paused.ID, projections.WebhookPatch{Status: ptr("disabled")}); err != nil {
		t.Fatal(err)
	}
	keys := func(wh string) int {
		n := 0
		_ = w.store.Scan(webhookPrefix(wh), func(_, _ []byte) error { n++; return nil })
		return n
	}
	if keys(gone.ID) == 0 || keys(paused.ID) == 0 {
		t.Fatal("no delivery state to drop or keep")
	}
	w.start(testConfig())
	waitFor(t, "the deleted webhook's delivery state dropped", func() bool { return keys(gone.ID) == 0 })
	if keys(paused.ID) == 0 {
		t.Error("the disabled webhook's delivery state was dropped too")
	}
}

// writeHolder holds every write's fsync wait until release closes, and
// counts the writes started.
type writeHolder struct {
	stateWriter
	release <-chan struct{}
	started *atomic.Int64
}

func (h writeHolder) StartWriteSync(puts []eventlog.Put, delFrom, delTo []byte) func() error {
	h.started.Add(1)
	synced := h.stateWriter.StartWriteSync(puts, delFrom, delTo)
	return func() error {
		<-h.release
		return synced()
	}
}

// blockedIn reports whether a goroutine waits in state (a channel
// receive, say) with fn on its stack.
func blockedIn(fn, state string) bool {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "["+state) && strings.Contains(g, fn+"(") {
			return true
		}
	}
	return false
}

// TestALoopCancelledWhileWaitingForAWriteSlotStartsNoWrite deletes a
// webhook whose loop waits for a write slot (two writes of new deliveries
// syncing, a third step ready): once the writes return, the loop ends
// without starting the third.
func TestALoopCancelledWhileWaitingForAWriteSlotStartsNoWrite(t *testing.T) {
	w := openWorld(t, "")
	wh := w.register(newReceiver(t, nil).URL, "contact.created")
	w.sessions(t, w.newAgent(), 0, (maxWritesInFlight+1)*maxCollect) // a step of new deliveries more than the slots
	release := make(chan struct{})
	var started atomic.Int64
	w.startWith(testConfig(), nil, func(dp *Dispatcher) {
		dp.store.w = writeHolder{stateWriter: dp.store.w, release: release, started: &started}
	})
	waitFor(t, "the loop waiting for a write slot", func() bool {
		return started.Load() == maxWritesInFlight && blockedIn("demosvc/delivery.(*loop).start", "chan receive")
	})
	if err := w.state.DeleteWebhook(t.Context(), w.pr, wh.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loop cancelled", func() bool { return !w.hasLoop(wh.ID) })
	close(release)
	waitFor(t, "the deleted webhook's state dropped", func() bool {
		n := 0
		_ = w.store.Scan(webhookPrefix(wh.ID), func(_, _ []byte) error { n++; return nil })
		return n == 0
	})
	if n := started.Load(); n != maxWritesInFlight {
		t.Errorf("%d writes started, want %d: the cancelled loop started one after it waited", n, maxWritesInFlight)
	}
}

// outcomeHolder holds the first outcome write (one that moves no cursor)
// after arm once it is durable: readable in the store, but not yet handed
// back to the loop, as when the loop's select takes another case first.
type outcomeHolder struct {
	stateWriter
	armed   *atomic.Bool
	held    *atomic.Int64
	release chan struct{}
}

func (h outcomeHolder) StartWriteSync(puts []eventlog.Put, delFrom, delTo []byte) func() error {
	synced := h.stateWriter.StartWriteSync(puts, delFrom, delTo)
	if len(puts) == 0 || isCursorKey(puts[len(puts)-1].Key) || !h.armed.CompareAndSwap(true, false) {
		return synced
	}
	return func() error {
		err := synced()
		h.held.Add(1)
		<-h.release
		return err
	}
}

// TestARetryOfADeliveryWhoseFailureIsBeingStoredIsNotLost: an operator
// retries a delivery the attempt log shows failed while the loop has not
// yet taken back the write that stored it. Taken back after the retry,
// that write took the retried delivery out of the pending set: its
// attempt was sent, its outcome dropped, and it stayed pending with no
// attempt until a restart sent it again.
func TestARetryOfADeliveryWhoseFailureIsBeingStoredIsNotLost(t *testing.T) {
	w := openWorld(t, "")
	second := make(chan struct{})
	rv := newReceiver(t, func(n int) (int, time.Duration) {
		if n == 1 {
			return 500, 0
		}
		<-second
		return 200, 0
	})
	wh := w.register(rv.URL, "contact.created")
	h := outcomeHolder{armed: new(atomic.Bool), held: new(atomic.Int64), release: make(chan struct{})}
	h.armed.Store(true)
	cfg := testConfig()
	cfg.MaxRetries = 0
	w.startWith(cfg, nil, func(dp *Dispatcher) { h.stateWriter = dp.store.w; dp.store.w = h })
	w.startSession(w.newAgent(), "a@example.com")
	var id string
	waitFor(t, "the failure in the store, its write not yet taken back", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		if len(ds) == 1 && ds[0].Status == StatusFailed && h.held.Load() == 1 {
			id = ds[0].ID
			return true
		}
		return false
	})
	if d, err := w.m.Retry(t.Context(), wh.ID, id); err != nil || d.Status != StatusPending {
		t.Fatalf("retry: %+v, %v; want it pending", d, err)
	}
	waitFor(t, "the retried attempt at the receiver", func() bool { return rv.count() == 2 })
	if got := rv.all(); !bytes.Equal(got[1].body, got[0].body) {
		t.Errorf("the retry sent %q, not the body sent first", got[1].body)
	}
	close(h.release) // the loop takes the write back now, after the retry
	w.throughLoop(wh.ID)
	close(second) // the retried attempt succeeds
	waitFor(t, "the retried delivery stored as succeeded", func() bool {
		d, _, _ := w.m.store.get(wh.ID, id)
		return d.Status == StatusSucceeded && d.Attempts == 1
	})
}

// A retry asked of a webhook whose deliveries are not running (stopped
// here; also disabled, just registered, or stopped by a storage error)
// says so, rather than that the delivery does not exist.
func TestARetryWithoutADeliveryLoopSaysDeliveriesAreNotRunning(t *testing.T) {
	w, wh := deliveredOnce(t)
	id := deliveriesOf(t, w, wh.ID)[0].ID
	w.stop()
	if _, err := w.m.Retry(t.Context(), wh.ID, id); !errors.Is(err, ErrNotRunning) {
		t.Errorf("a retry with the deliveries stopped: %v, want ErrNotRunning", err)
	}
}

// deliveredOnce is a running world whose webhook on contact.created has
// had one delivery, succeeded.
func deliveredOnce(t *testing.T) (*world, projections.WebhookView) {
	t.Helper()
	w := openWorld(t, "")
	wh := w.register(newReceiver(t, nil).URL, "contact.created")
	w.start(testConfig())
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "one delivery", func() bool { return allStatus(t, w, wh.ID, 1, StatusSucceeded) })
	return w, wh
}

// TestAnAttemptKeepsBoundedAnswerHeadersAndTheDetailTheNewestAttempts:
// a receiver answering with 60 KiB of headers has 4 KiB of them kept with
// each attempt, and a note of what was left out; a delivery retried by
// hand without end shows its newest maxShownAttempts attempts. Each
// attempt kept the whole head, and the detail built every attempt at once.
func TestAnAttemptKeepsBoundedAnswerHeadersAndTheDetailTheNewestAttempts(t *testing.T) {
	w := openWorld(t, "")
	big := strings.Repeat("v", 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		for i := range 60 {
			rw.Header().Set(fmt.Sprintf("X-Big-%02d", i), big)
		}
		rw.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	wh := w.register(srv.URL, "contact.created")
	cfg := testConfig()
	cfg.MaxRetries = 0
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	var id string
	waitFor(t, "the delivery failed", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		if len(ds) == 1 && ds[0].Status == StatusFailed {
			id = ds[0].ID
			return true
		}
		return false
	})
	const tries = maxShownAttempts + 5
	for i := 1; i < tries; i++ {
		if _, err := w.m.Retry(t.Context(), wh.ID, id); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the retry failed", func() bool {
			d, err := w.m.Delivery(wh.ID, id)
			return err == nil && d.Status == StatusFailed && d.Attempts == 1
		})
	}
	d, err := w.m.Detail(wh.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Log) != maxShownAttempts || d.Log[len(d.Log)-1].N != tries || d.Log[0].N != tries-maxShownAttempts+1 {
		t.Fatalf("the detail shows %d attempts, %d to %d; want the newest %d, %d to %d", len(d.Log), d.Log[0].N, d.Log[len(d.Log)-1].N,
			maxShownAttempts, tries-maxShownAttempts+1, tries)
	}
	for _, a := range d.Log {
		size := 0
		for k, v := range a.ResponseHeaders {
			if k != notKeptHeader {
				size += len(k) + len(v)
			}
		}
		if size > maxKeptHeader || !strings.Contains(a.ResponseHeaders[notKeptHeader], "headers beyond the 4096 bytes kept") {
			t.Fatalf("attempt %d keeps %d bytes of answer headers (note %q); want at most %d and a note", a.N, size, a.ResponseHeaders[notKeptHeader], maxKeptHeader)
		}
	}
}

// TestAnAttemptShowsTheUserAgentItWasSentWith: the detail shows the
// User-Agent an attempt went out with, not the running build's (it was
// filled in from the configuration, so after an upgrade every older
// attempt showed one never sent).
func TestAnAttemptShowsTheUserAgentItWasSentWith(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created")
	cfg := testConfig()
	cfg.UserAgent = "demosvc/1.0"
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "the delivery", func() bool { return allStatus(t, w, wh.ID, 1, StatusSucceeded) })
	w.m.cfg.UserAgent = "demosvc/2.0" // as a later build shows it
	d, err := w.m.Detail(wh.ID, deliveriesOf(t, w, wh.ID)[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Log[0].RequestHeaders["User-Agent"]; got != "demosvc/1.0" || rv.all()[0].header.Get("User-Agent") != "demosvc/1.0" {
		t.Errorf("the attempt shows User-Agent %q; want the one it was sent with, demosvc/1.0", got)
	}
}

// TestAReplayNeverSendsAnotherAccountsRecord: a replay request naming a
// record of another account (which no request plans, and `log import`
// refuses) sends only the webhook's own account's records.
func TestAReplayNeverSendsAnotherAccountsRecord(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, func(int) (int, time.Duration) { return 200, 0 })
	wh := w.register(rv.URL, "contact.created")
	w.start(testConfig())
	w.startSession(w.newAgent(), "own@example.com")
	waitFor(t, "the first delivery", func() bool { return countStatus(t, w, wh.ID, StatusSucceeded) == 1 })

	other, err := w.state.CreateAccount(t.Context(), "cli", "Other", projections.PlanPro, 0)
	if err != nil {
		t.Fatal(err)
	}
	opr := projections.Principal{Account: other, KeyID: "key_other"}
	agent, err := w.state.CreateAgent(t.Context(), opr, projections.AgentInput{Name: "Bo", SandboxURL: "https://s.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.state.StartSession(t.Context(), opr, projections.SessionInput{AgentID: agent.(projections.AgentView).ID,
		Contact: &projections.Contact{Name: "Victim", Email: "victim@b.example.com"}}, nil); err != nil {
		t.Fatal(err)
	}
	var otherSeq, ownSeq uint64
	err = w.log.Read(1, w.log.DurableSeq(), func(rec *eventlog.Record) error {
		if rec.Type == projections.TypeContactCreated {
			if rec.Account == other.ID {
				otherSeq = rec.Seq
			} else {
				ownSeq = rec.Seq
			}
		}
		return nil
	})
	if err != nil || otherSeq == 0 || ownSeq == 0 {
		t.Fatalf("contact.created seqs: own %d, other %d (%v)", ownSeq, otherSeq, err)
	}
	// Both in one request, the other account's first: they are built
	// together, so once the own one is sent the other would have been too.
	if _, err := w.state.RequestRedelivery(t.Context(), w.pr, wh.ID, projections.RedeliverReplay, nil,
		[]uint64{otherSeq, ownSeq}, projections.RedeliveryAnswer{}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replayed delivery", func() bool { return countStatus(t, w, wh.ID, StatusSucceeded) >= 2 })
	if ds := deliveriesOf(t, w, wh.ID); len(ds) != 2 {
		t.Errorf("%d deliveries, want the first and its replay", len(ds))
	}
	for _, r := range rv.all() {
		if bytes.Contains(r.body, []byte("victim@b.example.com")) {
			t.Errorf("another account's contact was sent: %s", r.body)
		}
	}
}
