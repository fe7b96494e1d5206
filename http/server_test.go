package http

import (
	"bytes"
	crand "crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"demosvc/config"
	"demosvc/eventlog"
	"demosvc/projections"
)

// testServer runs the real stack on a real Pebble in a temp dir.
type testServer struct {
	*Server
	logs  *syncBuffer
	store *eventlog.Store
	state *projections.Projections
	key   string // the bootstrap key; empty when the data dir had one already
	close func()
}

func newTestServer(t *testing.T, mutate func(*config.Config)) *testServer {
	t.Helper()
	return newTestServerTB(t, mutate)
}

func newTestServerTB(t testing.TB, mutate func(*config.Config)) *testServer {
	t.Helper()
	return openTestServer(t, t.TempDir(), mutate)
}

// openTestServer opens the stack on the data dir dir; close (also run at
// the test's end) stops it.
func openTestServer(t testing.TB, dir string, mutate func(*config.Config)) *testServer {
	t.Helper()
	return openTestServerOn(t, dir, mutate, eventlog.StoreOptions{})
}

// openTestServerOn is openTestServer on a store opened with storeOpts. A
// store with a fault-injecting FS is not closed: Pebble may stay wedged
// after a failed WAL sync.
func openTestServerOn(t testing.TB, dir string, mutate func(*config.Config), storeOpts eventlog.StoreOptions) *testServer {
	t.Helper()
	return openTestServerKeyed(t, dir, mutate, storeOpts, bytes.Repeat([]byte{7}, 32))
}

// openTestServerKeyed is openTestServerOn with masterKey as the data dir's
// master key.
func openTestServerKeyed(t testing.TB, dir string, mutate func(*config.Config), storeOpts eventlog.StoreOptions, masterKey []byte) *testServer {
	t.Helper()
	storeOpts.Create = true
	store, err := eventlog.OpenStore(dir, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		t.Fatal(err)
	}
	opts := projections.DefaultOptions
	if opts.Sealer, err = eventlog.NewSealer(masterKey, crand.Reader); err != nil {
		t.Fatal(err)
	}
	state, err := projections.Open(log, opts)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			state.Close()
			log.Close()
			if storeOpts.FS == nil {
				store.Close()
			}
		})
	}
	t.Cleanup(closeAll)
	cfg := config.Default()
	if mutate != nil {
		mutate(cfg)
	}
	_, key, _, err := state.Bootstrap(t.Context(), projections.PlanPro)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s := NewServer(Deps{Log: log, State: state, Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return &testServer{Server: s, logs: logs, store: store, state: state, key: key.Key, close: closeAll}
}

// syncBuffer is a log destination the server writes from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (ts *testServer) do(method, path, body string, header ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+ts.key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	ts.ServeHTTP(w, req)
	return w
}

func errorOf(t *testing.T, w *httptest.ResponseRecorder) ErrorObject {
	t.Helper()
	var body ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q is not an error object: %v", w.Body.String(), err)
	}
	return body.Error
}

func TestPanicIsA500WithoutDetail(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.front.next = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("secret detail") })
	w := ts.do("GET", "/v1/account", "")
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", w.Code)
	}
	e := errorOf(t, w)
	if e.Code != "internal_error" || e.Message != "internal error" {
		t.Errorf("error = %+v", e)
	}
	if strings.Contains(w.Body.String(), "secret detail") {
		t.Error("the panic value reached the client")
	}
	if !strings.Contains(ts.logs.String(), "secret detail") || !strings.Contains(ts.logs.String(), "goroutine") {
		t.Error("the panic and its stack were not logged")
	}
	if w.Header().Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on a 500")
	}
	// The line names the route, not the path: a dashboard setup link's
	// path is its token.
	ts.do("GET", "/setup/setup-token-in-the-path", "")
	if strings.Contains(ts.logs.String(), "setup-token-in-the-path") {
		t.Errorf("a panic's line holds the request's path:\n%s", ts.logs.String())
	}
}

func TestDecodeJSONRefusesBadBodiesWithParam(t *testing.T) {
	ts := newTestServer(t, func(c *config.Config) { c.HTTP.MaxBodyBytes = 64 })
	type input struct {
		Name  string   `json:"name"`
		Count int      `json:"count"`
		Tags  []string `json:"tags"`
	}
	for _, tc := range []struct {
		name, ct, body  string
		code, param     string
		messageContains string
	}{
		{"no content type", "", `{}`, "unsupported_media_type", "", "Content-Type: application/json"},
		{"text/plain", "text/plain", `{}`, "unsupported_media_type", "", ""},
		{"too large", "application/json", `{"name":"` + strings.Repeat("x", 100) + `"}`, "payload_too_large", "", "64 bytes"},
		{"empty", "application/json", ``, "invalid_request", "", "empty"},
		{"malformed", "application/json", `{"name":`, "invalid_request", "", "not valid JSON"},
		{"not an object", "application/json", `[1,2]`, "invalid_request", "", "must be a JSON object"},
		{"wrong type", "application/json", `{"count":"7"}`, "invalid_request", "count", "count must be an integer"},
		{"fraction", "application/json", `{"count":7.5}`, "invalid_request", "count", "count must be an integer"},
		{"unknown field", "application/json", `{"colour":"red"}`, "invalid_request", "colour", `unknown field "colour"`},
		{"trailing data", "application/json", `{} {}`, "invalid_request", "", "after the JSON object"},
		{"invalid utf-8", "application/json", "{\"name\":\"\xff\"}", "invalid_request", "name", "UTF-8"},
		{"charset is fine", "application/json; charset=utf-8", `{"name":"ok"}`, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/x", strings.NewReader(tc.body))
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			var in input
			_, err := ts.readJSON(httptest.NewRecorder(), req, &in)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			e, ok := shown(err)
			if !ok {
				t.Fatalf("err = %v, want an answer", err)
			}
			if e.Code != tc.code || e.Param != tc.param || !strings.Contains(e.Message, tc.messageContains) {
				t.Errorf("got code %q param %q message %q; want code %q param %q message containing %q",
					e.Code, e.Param, e.Message, tc.code, tc.param, tc.messageContains)
			}
		})
	}
}

// A body is read whatever length it declares: exactly (small, or past
// what is allocated before reading), unknown (chunked), more than it
// sends, or, unknown, more than the limit.
func TestReadJSONTakesEveryDeclaredLength(t *testing.T) {
	ts := newTestServer(t, func(c *config.Config) { c.HTTP.MaxBodyBytes = 64 << 10 })
	large := strings.Repeat("x", maxPresizedBody)
	for _, tc := range []struct {
		name, value string
		length      int64 // -2: the body's own
		code        string
		contains    string
	}{
		{"exact", "ok", -2, "", ""},
		{"exact, past the presized size", large, -2, "", ""},
		{"unknown", "ok", -1, "", ""},
		{"unknown and too large", strings.Repeat("x", 70<<10), -1, "payload_too_large", "65536 bytes"},
		{"more than sent", "ok", 40, "invalid_request", "the request body could not be read: it ended early"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"name":"` + tc.value + `"}`
			req := httptest.NewRequest("POST", "/x", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if tc.length != -2 {
				req.ContentLength = tc.length
			}
			var in struct {
				Name string `json:"name"`
			}
			_, err := ts.readJSON(httptest.NewRecorder(), req, &in)
			if tc.code == "" {
				if err != nil || in.Name != tc.value {
					t.Fatalf("err = %v, name of %d bytes; want nil, %d bytes", err, len(in.Name), len(tc.value))
				}
				return
			}
			e, ok := shown(err)
			if !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.contains) {
				t.Errorf("err = %v; want %s containing %q", err, tc.code, tc.contains)
			}
		})
	}
}

func TestHugeHeadersAndBadKeysNeverGiveA5xx(t *testing.T) {
	ts := newTestServer(t, nil)
	srv := httptest.NewUnstartedServer(ts)
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Start()
	defer srv.Close()
	for _, auth := range []string{
		"Bearer " + strings.Repeat("a", 1<<20),
		"Bearer sk_" + strings.Repeat("é", 20),
		"Bearer sk_" + strings.Repeat("A", 43),
		"bearer",
		"Token abc",
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/account", nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%.20q: %v", auth, err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("Authorization %.20q: status %d, want a 4xx", auth, resp.StatusCode)
		}
	}
}

func TestTenThousandBadKeysFromOneAddressStayBounded(t *testing.T) {
	ts := newTestServer(t, nil)
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts.badAuth = NewLimiters(func() time.Time { return frozen }, maxBadAuthClients)
	counts := map[string]int{}
	for i := 0; i < 10_000; i++ {
		req := httptest.NewRequest("GET", "/v1/account", nil)
		req.RemoteAddr = "198.51.100.7:4242"
		req.Header.Set("Authorization", "Bearer sk_"+strings.Repeat(string(rune('a'+i%26)), 43))
		w := httptest.NewRecorder()
		ts.ServeHTTP(w, req)
		counts[badKeyAnswer(w)]++
	}
	if counts[unauthorized] != 60 || counts[limited] != 10_000-60 || len(counts) != 2 {
		t.Errorf("answers = %v, want 60 x %s then %s", counts, unauthorized, limited)
	}
	if n := ts.badAuth.Len(); n != 1 {
		t.Errorf("%d per-address buckets for one address", n)
	}
}

// TestNotReadyUntilTheStateIsRebuilt serves the API address as serve does:
// the starting handler behind a Switch, then the server, then stopping.
func TestNotReadyUntilTheStateIsRebuilt(t *testing.T) {
	ts := newTestServer(t, nil)
	stopping := make(chan struct{})
	metrics := NewMetrics(func() float64 { return 0 })
	health := NewHealth(ts.deps.Log, stopping)
	addr := NewSwitch(NewStarting(ts.deps.Logger, metrics, health))
	get := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("Authorization", "Bearer "+ts.key)
		w := httptest.NewRecorder()
		addr.ServeHTTP(w, req)
		if w.Header().Get("X-Request-Id") == "" {
			t.Errorf("%s %s: no X-Request-Id", method, path)
		}
		return w
	}
	if w := get("GET", "/healthz"); w.Code != 200 {
		t.Errorf("/healthz while replaying = %d, want 200", w.Code)
	}
	if w := get("GET", "/readyz"); w.Code != 503 || !strings.Contains(w.Body.String(), `"starting"`) {
		t.Errorf("/readyz while replaying = %d %s, want 503 starting", w.Code, w.Body)
	}
	if w := get("GET", "/metrics"); w.Code != 200 || !strings.Contains(w.Body.String(), `demosvc_http_requests_total{code="200",method="GET",route="/healthz"} 1`) {
		t.Errorf("/metrics while replaying = %d, want 200 counting the /healthz above", w.Code)
	}
	for _, req := range [][2]string{{"GET", "/v1/account"}, {"POST", "/v1/agents"}, {"GET", "/v1/nothing"}, {"DELETE", "/v1"}} {
		if w := get(req[0], req[1]); w.Code != 503 || errorOf(t, w).Code != "unavailable" || w.Header().Get("Retry-After") == "" {
			t.Errorf("%s %s while replaying = %d %s, want 503 unavailable with Retry-After", req[0], req[1], w.Code, w.Body)
		}
	}
	if w := get("GET", "/nothing"); w.Code != 404 || errorOf(t, w).Code != "not_found" {
		t.Errorf("/nothing while replaying = %d %s, want 404 not_found", w.Code, w.Body)
	}
	if w := get("POST", "/healthz"); w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /healthz while replaying = %d (Allow %q), want 405 (Allow GET, HEAD)", w.Code, w.Header().Get("Allow"))
	}

	d := ts.deps
	d.Metrics, d.Stopping, d.Health = metrics, stopping, health
	addr.To(NewServer(d))
	if w := get("GET", "/readyz"); w.Code != 200 {
		t.Errorf("/readyz when ready = %d", w.Code)
	}
	if w := get("GET", "/v1/account"); w.Code != 200 {
		t.Errorf("/v1/account when ready = %d %s", w.Code, w.Body)
	}
	close(stopping)
	if w := get("GET", "/readyz"); w.Code != 503 || !strings.Contains(w.Body.String(), `"stopping"`) {
		t.Errorf("/readyz when stopping = %d %s, want 503 stopping", w.Code, w.Body)
	}
}
