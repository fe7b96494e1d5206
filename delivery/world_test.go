package delivery

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"demosvc/eventlog"
	"demosvc/projections"
)

// The parts the delivery tests run on: real receivers on 127.0.0.1, a
// real store in a temp dir, the dispatcher as the binary builds it, and
// waits that poll with a deadline.

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

// webhookStatus returns a webhook's status: enabled or disabled.
func (w *world) webhookStatus(id string) string {
	w.t.Helper()
	v, err := w.state.Webhook(w.pr.Account.ID, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return v.Status
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
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitAdvancing(t, nil, 0, what, cond)
}

// waitAdvancing is waitFor that also moves clock by step at every poll, so
// that retries the condition waits for come due without real time.
func waitAdvancing(t testing.TB, clock *manualClock, step time.Duration, what string, cond func() bool) {
	t.Helper()
	// The deadline only bounds a failing test. Under -race on a shared
	// 2-core machine, the 10,100-delivery backlog of the restart test
	// takes 60-110 s, so it is generous.
	deadline := time.Now().Add(180 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if clock != nil {
			clock.Advance(step)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

// recv takes one value from ch, or fails the test after a deadline that
// only bounds a failing test.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(90 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
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
	m     *Dispatcher
}

// testConfig runs on the system clock, as the benchmarks do; a test that
// waits on retries gives it a manualClock.
func testConfig() Config {
	return Config{Timeout: 2 * time.Second, MaxRetries: 3, Backoff: 20 * time.Millisecond, BackoffFactor: 2,
		Concurrency: 8, AllowPrivate: true, StandardWebhooks: true, UserAgent: "demosvc/test"}
}

// clockedConfig is testConfig on a manual clock.
func clockedConfig() (Config, *manualClock) {
	cfg, clock := testConfig(), newManualClock()
	cfg.Clock = clock
	return cfg, clock
}

var testKey = make([]byte, eventlog.MasterKeySize)

func openWorld(t testing.TB, dir string) *world {
	t.Helper()
	return openWorldOn(t, dir, nil)
}

// openWorldOn is openWorld on fsys (nil: the real filesystem), to inject
// storage faults.
func openWorldOn(t testing.TB, dir string, fsys vfs.FS) *world {
	t.Helper()
	return openWorldReplicated(t, dir, fsys, nil)
}

// openWorldReplicated is openWorldOn with its log a replica through repl
// (nil: a single node's log).
func openWorldReplicated(t testing.TB, dir string, fsys vfs.FS, repl eventlog.Replicator) *world {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{Create: true, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now),
		Replicator: repl})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := eventlog.NewSealer(testKey, crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
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

func (w *world) start(cfg Config) { w.startLogging(cfg, nil) }

func (w *world) startLogging(cfg Config, logger *slog.Logger) { w.startWith(cfg, logger, nil) }

// startWith starts the dispatcher after prepare, if set, has changed it.
func (w *world) startWith(cfg Config, logger *slog.Logger, prepare func(*Dispatcher)) {
	ctx, cancel := context.WithCancel(context.Background())
	w.m = New(w.log, w.state, cfg, logger)
	if prepare != nil {
		prepare(w.m)
	}
	done := make(chan struct{})
	go func() { w.m.Run(ctx); close(done) }()
	w.stop = func() { cancel(); recv(w.t, done, "the dispatcher to stop") }
}

// throughLoop returns once webhook wh's loop has been twice round its
// select, answering a Retry of a delivery that does not exist. The first
// may be taken in an iteration that began before the caller's last write;
// the second only after a whole iteration that began after it, and so saw
// it: whatever that iteration collects and dispatches is done by then.
func (w *world) throughLoop(wh string) {
	w.t.Helper()
	// A dispatcher just started may not have started its loops yet.
	waitFor(w.t, "webhook "+wh+"'s delivery loop", func() bool { return w.hasLoop(wh) })
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		_, err := w.m.Retry(ctx, wh, "dlv_none")
		cancel()
		if !errors.Is(err, ErrNoDelivery) {
			w.t.Fatalf("a retry through the loop of %s: %v", wh, err)
		}
	}
}

// hasLoop reports whether the dispatcher runs a loop for wh.
func (w *world) hasLoop(wh string) bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.m.loops[wh] != nil
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

func deliveriesOf(t *testing.T, w *world, wh string) []Delivery {
	t.Helper()
	ds, _, err := w.m.Deliveries(wh, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// holdingReceiver accepts every request and answers none until the test
// ends: a dead receiver that keeps its connections open.
type holdingReceiver struct {
	*httptest.Server
	held     atomic.Int64 // requests being held
	answered atomic.Int64 // requests that ended, whichever way
}

func newHoldingReceiver(t *testing.T) *holdingReceiver {
	hr := &holdingReceiver{}
	release := make(chan struct{})
	hr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hr.held.Add(1)
		defer hr.answered.Add(1)
		select {
		case <-release:
			w.WriteHeader(http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	}))
	// Registered after the world, so it runs before the world closes: the
	// dispatcher's shutdown waits for attempts in flight to end.
	t.Cleanup(func() { close(release); hr.Close() })
	return hr
}
