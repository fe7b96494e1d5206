package delivery

import (
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
)

// receiver is a real HTTP server on 127.0.0.1 that records what it gets
// and answers as the test says.
type receiver struct {
	*httptest.Server
	mu        sync.Mutex
	got       []received
	cancelled int // requests whose sender gave up before the answer
	answer    func(n int) (status int, delay time.Duration)
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, answer func(n int) (int, time.Duration)) *receiver {
	rv := &receiver{answer: answer}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rv.mu.Lock()
		rv.got = append(rv.got, received{header: r.Header.Clone(), body: body})
		n := len(rv.got)
		rv.mu.Unlock()
		status, delay := http.StatusOK, time.Duration(0)
		if rv.answer != nil {
			status, delay = rv.answer(n)
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				rv.mu.Lock()
				rv.cancelled++
				rv.mu.Unlock()
				return
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rv.Close)
	return rv
}

// newSwitchableReceiver answers 500 until healthy is set, then 200.
func newSwitchableReceiver(t *testing.T) (*receiver, *atomic.Bool) {
	healthy := new(atomic.Bool)
	rv := newReceiver(t, func(int) (int, time.Duration) {
		if healthy.Load() {
			return 200, 0
		}
		return 500, 0
	})
	return rv, healthy
}

func (rv *receiver) count() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.got)
}

func (rv *receiver) all() []received {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]received(nil), rv.got...)
}

// waitFor polls cond until it holds or a generous deadline passes: the
// deadline only bounds a failing test, it asserts nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

type world struct {
	t     testing.TB
	dir   string
	store *eventlog.Store
	log   *eventlog.Log
	state *projections.Projections
	pr    projections.Principal
	agent string
	stop  func()
	m     *Manager
}

func testConfig() Config {
	return Config{Timeout: 2 * time.Second, MaxRetries: 3, Backoff: 20 * time.Millisecond, BackoffFactor: 2,
		Concurrency: 8, AllowPrivate: true, StandardWebhooks: true, UserAgent: "demosvc/test"}
}

var testKey = make([]byte, eventlog.MasterKeySize)

func openWorld(t testing.TB, dir string) *world {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		t.Fatal(err)
	}
	sealer, _ := eventlog.NewSealer(testKey, crand.Reader)
	opts := projections.DefaultOptions
	opts.Sealer, opts.AllowPrivateNetworks = sealer, true
	state, err := projections.Open(log, opts)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, dir: dir, store: store, log: log, state: state}
	t.Cleanup(w.close)
	accs := state.Accounts()
	if len(accs) == 0 {
		acc, err := state.CreateAccount(t.Context(), "cli", "Acme", projections.PlanPro, 0)
		if err != nil {
			t.Fatal(err)
		}
		accs = append(accs, acc)
	}
	w.pr = projections.Principal{Account: accs[0], KeyID: "key_test"}
	return w
}

func (w *world) close() {
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	if w.state != nil {
		w.state.Close()
		w.log.Close()
		w.store.Close()
		w.state = nil
	}
}

func (w *world) start(cfg Config) {
	ctx, cancel := context.WithCancel(context.Background())
	w.m = New(w.log, w.state, cfg, nil)
	done := make(chan struct{})
	go func() { w.m.Run(ctx); close(done) }()
	w.stop = func() { cancel(); <-done }
}

func (w *world) register(url string, events ...string) projections.WebhookView {
	w.t.Helper()
	v, err := w.state.RegisterWebhook(w.t.Context(), w.pr, projections.WebhookInput{URL: url, Events: events}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return v.(projections.WebhookView)
}

func (w *world) newAgent() string {
	w.t.Helper()
	v, err := w.state.CreateAgent(w.t.Context(), w.pr, projections.AgentInput{Name: "Ava", SandboxURL: "https://s.example.com"}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return v.(projections.AgentView).ID
}

// startedSession is what the tests read of a session's JSON.
type startedSession struct {
	ID        string `json:"id"`
	ContactID string `json:"contact_id"`
}

func (w *world) startSession(agent, email string) startedSession {
	w.t.Helper()
	v, err := w.state.StartSession(w.t.Context(), w.pr, projections.SessionInput{AgentID: agent,
		Contact: &projections.Contact{Name: "Pat Lee", Email: email, Company: "Globex"}}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	var s startedSession
	if err := json.Unmarshal(v.(json.RawMessage), &s); err != nil {
		w.t.Fatal(err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestEveryEventIsDeliveredSignedInTheSeedsShape(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created", "demo.abandoned", "demo.completed", "lead.hot", "meeting.booked")
	w.start(testConfig())
	ctx := t.Context()
	agent := w.newAgent()
	s1 := w.startSession(agent, "pat@example.com")
	w.state.ProgressSession(ctx, w.pr, s1.ID, projections.Figures{IntentScore: ptr(90), Signals: &projections.Signals{Interest: 80, Objections: 10, BuyingSignals: 95}}, nil)
	w.state.CompleteSession(ctx, w.pr, s1.ID, projections.Figures{IntentScore: ptr(91), Signals: &projections.Signals{Interest: 88, Objections: 12, BuyingSignals: 95},
		DurationSeconds: ptr(1200), ReplayURL: ptr("https://replay.example.com/s1")}, nil)
	w.state.BookMeeting(ctx, w.pr, s1.ID, projections.MeetingInput{ScheduledAt: "2026-12-01T15:00:00Z", CalendarLink: "https://cal.example.com/m1"}, nil)
	s2 := w.startSession(agent, "pat@example.com") // the same contact: no contact.created
	w.state.AbandonSession(ctx, w.pr, s2.ID, projections.Figures{DurationSeconds: ptr(42), IntentScore: ptr(10)}, nil)
	waitFor(t, "5 deliveries", func() bool { return rv.count() >= 5 })

	want := map[string]string{
		"contact.created": `{"contact_id":"` + s1.ContactID + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"},"session_id":"` + s1.ID + `","agent_id":"` + agent + `"}`,
		"lead.hot":        `{"session_id":"` + s1.ID + `","agent_id":"` + agent + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"},"signals":{"interest":80,"objections":10,"buying_signals":95}}`,
		"demo.completed":  `{"session_id":"` + s1.ID + `","agent_id":"` + agent + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"},"duration_seconds":1200,"intent_score":91,"meeting_booked":false,"replay_url":"https://replay.example.com/s1"}`,
		"meeting.booked":  `{"session_id":"` + s1.ID + `","contact":{"name":"Pat Lee","email":"pat@example.com"},"meeting":{"scheduled_at":"2026-12-01T15:00:00Z","calendar_link":"https://cal.example.com/m1"}}`,
		"demo.abandoned":  `{"session_id":"` + s2.ID + `","agent_id":"` + agent + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"},"duration_seconds":42,"intent_score":10,"meeting_booked":false,"replay_url":""}`,
	}
	var order []string
	for _, r := range rv.all() {
		var env map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &env); err != nil {
			t.Fatalf("body %s: %v", r.body, err)
		}
		if len(env) != 3 || env["event"] == nil || env["timestamp"] == nil || env["data"] == nil {
			t.Errorf("envelope has keys other than event, timestamp, data: %s", r.body)
		}
		var name, ts string
		json.Unmarshal(env["event"], &name)
		json.Unmarshal(env["timestamp"], &ts)
		order = append(order, name)
		if _, err := time.Parse(time.RFC3339, ts); err != nil || !strings.HasSuffix(ts, "Z") {
			t.Errorf("%s: timestamp %q is not RFC 3339 UTC", name, ts)
		}
		if got := string(env["data"]); got != want[name] {
			t.Errorf("%s data:\n got  %s\n want %s", name, got, want[name])
		}
		// The receiver's own HMAC over the exact body, keyed with the
		// secret string as shown at registration.
		mac := hmac.New(sha256.New, []byte(wh.Secret))
		mac.Write(r.body)
		if got, want := r.header.Get("X-Service-Signature"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
			t.Errorf("%s: X-Service-Signature %q, want %q", name, got, want)
		}
		// Standard Webhooks: key is the base64 after whsec_, message id.ts.body.
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(wh.Secret, "whsec_"))
		smac := hmac.New(sha256.New, key)
		smac.Write([]byte(r.header.Get("webhook-id") + "." + r.header.Get("webhook-timestamp") + "."))
		smac.Write(r.body)
		if got, want := r.header.Get("webhook-signature"), "v1,"+base64.StdEncoding.EncodeToString(smac.Sum(nil)); got != want {
			t.Errorf("%s: webhook-signature %q, want %q", name, got, want)
		}
		if r.header.Get("X-Service-Webhook-Id") != wh.ID || !strings.HasPrefix(r.header.Get("X-Service-Event-Id"), "evt_") ||
			r.header.Get("X-Service-Delivery-Attempt") != "1" || r.header.Get("Content-Type") != "application/json" ||
			r.header.Get("User-Agent") != "demosvc/test" || r.header.Get("webhook-id") != r.header.Get("X-Service-Event-Id") {
			t.Errorf("%s: headers %v", name, r.header)
		}
	}
	if len(order) != 5 {
		t.Errorf("deliveries %v, want 5", order)
	}
}

func deliveriesOf(t *testing.T, w *world, wh string) []Delivery {
	t.Helper()
	ds, _, err := w.m.Deliveries(wh, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

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
		w.start(testConfig())
		w.startSession(w.newAgent(), "a@example.com")
		waitFor(t, "a succeeded delivery", func() bool {
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
	t.Run("a receiver that always fails gets exactly four attempts", func(t *testing.T) {
		w := openWorld(t, "")
		rv := newReceiver(t, func(int) (int, time.Duration) { return 503, 0 })
		wh := w.register(rv.URL, "contact.created")
		w.start(testConfig())
		w.startSession(w.newAgent(), "a@example.com")
		waitFor(t, "a failed delivery", func() bool {
			ds := deliveriesOf(t, w, wh.ID)
			return len(ds) == 1 && ds[0].Status == StatusFailed
		})
		d := deliveriesOf(t, w, wh.ID)[0]
		if d.Attempts != 4 || rv.count() != 4 || d.LastError != "the receiver answered 503 Service Unavailable" {
			t.Errorf("delivery %+v after %d requests", d, rv.count())
		}
	})
	t.Run("a receiver slower than the timeout fails", func(t *testing.T) {
		w := openWorld(t, "")
		rv := newReceiver(t, func(int) (int, time.Duration) { return 200, 5 * time.Second })
		wh := w.register(rv.URL, "contact.created")
		cfg := testConfig()
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
		cfg := testConfig()
		cfg.Backoff = time.Hour // the first event's retry would wait an hour
		w.start(cfg)
		agent := w.newAgent()
		w.startSession(agent, "a@example.com")
		waitFor(t, "the first attempt", func() bool { return rv.count() == 1 })
		w.startSession(agent, "b@example.com")
		waitFor(t, "the second event, before the first event's retry", func() bool { return rv.count() == 2 })
		ds := deliveriesOf(t, w, wh.ID)
		if len(ds) != 2 || ds[0].Status != StatusSucceeded || ds[1].Status != StatusPending {
			t.Errorf("deliveries %+v", ds)
		}
	})
}

func TestDeleteStopsEverythingForThatWebhook(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, func(int) (int, time.Duration) { return 500, 0 })
	wh := w.register(rv.URL, "contact.created")
	cfg := testConfig()
	cfg.Backoff = 100 * time.Millisecond
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "the first attempt", func() bool { return rv.count() == 1 })
	if err := w.state.DeleteWebhook(t.Context(), w.pr, wh.ID); err != nil {
		t.Fatal(err)
	}
	// The retry was due 80-120 ms after the first attempt; give it well over
	// that, and it must not come.
	deadline := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := rv.count(); n != 1 {
			t.Fatalf("%d requests after DELETE, want none after the first", n-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSSRFGuardRefusesLoopbackWithAClearError(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created")
	cfg := testConfig()
	cfg.AllowPrivate, cfg.MaxRetries = false, 0
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "a failed delivery", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		return len(ds) == 1 && ds[0].Status == StatusFailed
	})
	d := deliveriesOf(t, w, wh.ID)[0]
	if !strings.Contains(d.LastError, "refused: not a public address: 127.0.0.1") {
		t.Errorf("last_error %q", d.LastError)
	}
	if rv.count() != 0 {
		t.Errorf("the receiver got %d requests", rv.count())
	}
}

func TestABacklogAndPendingRetriesSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir)
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	cfg := testConfig()
	cfg.Backoff, cfg.MaxRetries = 100*time.Millisecond, 10
	w.start(cfg)
	w.sessions(t, agent, 0, 100) // these fail: pending retries at the stop
	waitFor(t, "100 first attempts", func() bool { return rv.count() >= 100 })
	w.stop()
	w.stop = nil
	w.sessions(t, agent, 100, 10_000) // a backlog appended while nothing delivers
	w.close()

	healthy.Store(true)
	w = openWorld(t, dir)
	w.start(cfg)
	waitFor(t, "10,100 deliveries succeeded", func() bool {
		ds, _, err := w.m.Deliveries(wh.ID, 20_000, "")
		if err != nil || len(ds) != 10_100 {
			return false
		}
		for _, d := range ds {
			if d.Status != StatusSucceeded {
				return false
			}
		}
		return true
	})
	seen := map[string]bool{}
	for _, r := range rv.all() {
		if r.header.Get("X-Service-Delivery-Attempt") != "" {
			seen[r.header.Get("X-Service-Event-Id")] = true
		}
	}
	if len(seen) != 10_100 {
		t.Errorf("%d distinct events reached the receiver, want 10,100", len(seen))
	}
}

func TestGoneDisablesTheWebhook(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, func(int) (int, time.Duration) { return http.StatusGone, 0 })
	wh := w.register(rv.URL, "contact.created")
	w.start(testConfig())
	agent := w.newAgent()
	w.startSession(agent, "a@example.com")
	waitFor(t, "the webhook disabled", func() bool {
		v, err := w.state.Webhook(w.pr.Account.ID, wh.ID)
		return err == nil && v.Status == "disabled"
	})
	ds := deliveriesOf(t, w, wh.ID)
	if len(ds) != 1 || ds[0].Status != StatusFailed || ds[0].Attempts != 1 || !strings.Contains(ds[0].LastError, "410 Gone") {
		t.Errorf("deliveries %+v", ds)
	}
	// Nothing more is sent, and the attempt log stays.
	w.startSession(agent, "b@example.com")
	head := w.log.DurableSeq()
	waitFor(t, "the log to move on", func() bool { return w.log.DurableSeq() >= head })
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if rv.count() != 1 {
			t.Fatalf("%d requests after 410, want none after the first", rv.count()-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ds := deliveriesOf(t, w, wh.ID); len(ds) != 1 {
		t.Errorf("attempt log after disabling: %d deliveries", len(ds))
	}
}

func TestDeleteCancelsTheAttemptInFlight(t *testing.T) {
	w := openWorld(t, "")
	started := make(chan struct{}, 1)
	var rv *receiver
	rv = newReceiver(t, func(int) (int, time.Duration) {
		select {
		case started <- struct{}{}:
		default:
		}
		return 200, 10 * time.Second
	})
	wh := w.register(rv.URL, "contact.created")
	w.start(testConfig())
	w.startSession(w.newAgent(), "a@example.com")
	<-started
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

func TestBadReceiversEndInAClearError(t *testing.T) {
	for _, tc := range []struct {
		name      string
		handler   http.HandlerFunc
		tls       bool // the webhook URL says https, the receiver speaks plain HTTP
		status    string
		lastError string
	}{
		{"a 100 MB answer is not read", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			chunk := make([]byte, 1<<20)
			for i := 0; i < 100; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, false, StatusSucceeded, ""},
		{"a slowloris trickle times out", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			for i := 0; i < 100; i++ {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(50 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
		}, false, StatusFailed, "within 300ms"},
		{"a TLS error", func(w http.ResponseWriter, r *http.Request) {}, true, StatusFailed, "http: server gave HTTP response to HTTPS client"},
		{"a connection reset", func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}, false, StatusFailed, "EOF"},
		{"a redirect is a failure", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example.com/", http.StatusFound)
		}, false, StatusFailed, "the receiver answered 302 Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := openWorld(t, "")
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			url := srv.URL
			if tc.tls {
				url = strings.Replace(url, "http://", "https://", 1)
			}
			wh := w.register(url, "contact.created")
			cfg := testConfig()
			cfg.Timeout, cfg.MaxRetries = 300*time.Millisecond, 0
			w.start(cfg)
			w.startSession(w.newAgent(), "a@example.com")
			waitFor(t, "the delivery to end", func() bool {
				ds := deliveriesOf(t, w, wh.ID)
				return len(ds) == 1 && ds[0].Status != StatusPending
			})
			d := deliveriesOf(t, w, wh.ID)[0]
			if d.Status != tc.status || !strings.Contains(d.LastError, tc.lastError) {
				t.Errorf("status %s, last_error %q; want %s with %q", d.Status, d.LastError, tc.status, tc.lastError)
			}
		})
	}
}

func TestAFailingReceiverPausesNewDeliveriesUntilItRecovers(t *testing.T) {
	w := openWorld(t, "")
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	cfg := testConfig()
	cfg.MaxRetries, cfg.Backoff = 50, 20*time.Millisecond
	w.start(cfg)
	agent := w.newAgent()
	w.startSession(agent, "first@example.com")
	waitFor(t, "three failed attempts", func() bool { return rv.count() >= 3 })
	for i := 0; i < 20; i++ {
		w.startSession(agent, fmt.Sprintf("p%d@example.com", i))
	}
	// Paused: the new events get no delivery while the receiver fails.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := len(deliveriesOf(t, w, wh.ID)); n != 1 {
			t.Fatalf("%d deliveries built while the receiver fails, want the first only", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	healthy.Store(true)
	waitFor(t, "all 21 delivered", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		if len(ds) != 21 {
			return false
		}
		for _, d := range ds {
			if d.Status != StatusSucceeded {
				return false
			}
		}
		return true
	})
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
