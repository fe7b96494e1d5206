package http

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"demosvc/config"
	"demosvc/eventlog"
	"demosvc/eventlog/eventlogtest"
	"demosvc/projections"
)

// faultyServer runs the real stack on a store whose WAL the test breaks.
type faultyServer struct {
	*testServer
	log    *eventlog.Log
	faults *eventlogtest.WALFaults
	logs   *syncBuffer
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

func newFaultyServer(t *testing.T) *faultyServer {
	t.Helper()
	fs, faults := eventlogtest.NewFS(nil)
	store, err := eventlog.OpenStore(t.TempDir(), eventlog.StoreOptions{Create: true, FS: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		t.Fatal(err)
	}
	state, err := projections.Open(log, projections.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	// Pebble may stay wedged after a failed WAL sync: do not close it.
	t.Cleanup(func() { state.Close(); log.Close() })
	_, key, _, err := state.Bootstrap(t.Context(), projections.PlanPro)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s := NewServer(Deps{Log: log, State: state, Config: config.Default(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return &faultyServer{testServer: &testServer{Server: s, state: state, key: key.Key}, log: log, faults: faults, logs: logs}
}

// A failed WAL write or fsync under the projections writer answers 503,
// acknowledges nothing and leaves the state equal to the durable log; the
// service then says it is read-only until a restart, on /readyz and in a
// gauge, and logs the refusals without flooding.
func TestAStorageFailureMakesTheServiceReadOnlyAndSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(*eventlogtest.WALFaults, error)
		err    error
	}{
		{"EIO on WAL sync", (*eventlogtest.WALFaults).FailSyncs, syscall.EIO},
		{"ENOSPC on WAL sync", (*eventlogtest.WALFaults).FailSyncs, syscall.ENOSPC},
		{"EIO on WAL write", (*eventlogtest.WALFaults).FailWrites, syscall.EIO},
		{"ENOSPC on WAL write", (*eventlogtest.WALFaults).FailWrites, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedWrites.mu.Lock()
			refusedWrites.last, refusedWrites.dropped = time.Time{}, 0
			refusedWrites.mu.Unlock()
			ts := newFaultyServer(t)
			if w := ts.do("POST", "/v1/agents", `{"name":"kept","sandbox_url":"https://sandbox.example.com/"}`, "Content-Type", "application/json"); w.Code != http.StatusCreated {
				t.Fatalf("create before the fault = %d %s", w.Code, w.Body)
			}
			if w := ts.do("GET", "/readyz", ""); w.Code != http.StatusOK {
				t.Fatalf("/readyz before the fault = %d %s", w.Code, w.Body)
			}
			if got := gauge(t, ts, "demosvc_read_only"); got != "0" {
				t.Errorf("demosvc_read_only before the fault = %s, want 0", got)
			}
			durable := ts.log.DurableSeq()

			tc.inject(ts.faults, tc.err)
			w := ts.do("POST", "/v1/agents", `{"name":"lost","sandbox_url":"https://sandbox.example.com/"}`, "Content-Type", "application/json")
			tc.inject(ts.faults, nil)
			if w.Code != http.StatusServiceUnavailable {
				t.Fatalf("create with a failing WAL = %d %s, want 503", w.Code, w.Body)
			}
			if e := errorOf(t, w); e.Code != "unavailable" || !strings.Contains(e.Message, "restart") {
				t.Errorf("error = %+v, want code unavailable with a message that says a restart is needed", e)
			}
			if ts.log.DurableSeq() != durable {
				t.Errorf("DurableSeq = %d after the failed commit, want %d", ts.log.DurableSeq(), durable)
			}

			// The disk is fine again, but whether the failed batch is on it
			// cannot be known: writes stay refused until a restart.
			for range 50 {
				if w := ts.do("POST", "/v1/agents", `{"name":"later","sandbox_url":"https://sandbox.example.com/"}`, "Content-Type", "application/json"); w.Code != http.StatusServiceUnavailable {
					t.Fatalf("create after the failure = %d %s, want 503", w.Code, w.Body)
				}
			}
			w = ts.do("GET", "/readyz", "")
			var ready struct{ Status, Reason string }
			if err := json.Unmarshal(w.Body.Bytes(), &ready); err != nil || w.Code != http.StatusServiceUnavailable ||
				ready.Status != "read_only" || !strings.Contains(ready.Reason, "restart") {
				t.Errorf("/readyz after the failure = %d %s, want 503 read_only with a reason that says to restart", w.Code, w.Body)
			}
			if got := gauge(t, ts, "demosvc_read_only"); got != "1" {
				t.Errorf("demosvc_read_only after the failure = %s, want 1", got)
			}
			if n := strings.Count(ts.logs.String(), "write refused"); n != 1 {
				t.Errorf("%d 'write refused' lines for 51 refused writes in one interval, want 1", n)
			}

			// Reads go on, and show only what was acknowledged.
			w = ts.do("GET", "/v1/agents", "")
			var list struct {
				Data []struct{ Name string } `json:"data"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != http.StatusOK {
				t.Fatalf("list after the failure = %d %s", w.Code, w.Body)
			}
			if len(list.Data) != 1 || list.Data[0].Name != "kept" {
				t.Errorf("agents after the failed commit = %+v, want only the one acknowledged before it", list.Data)
			}
		})
	}
}

func TestTheLogThrottleCountsWhatItLeavesOut(t *testing.T) {
	th := &logThrottle{interval: 10 * time.Second}
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	if ok, n := th.allow(t0); !ok || n != 0 {
		t.Fatalf("first = %v, %d", ok, n)
	}
	for i := range 41_999 {
		if ok, _ := th.allow(t0.Add(time.Duration(i) * 200 * time.Microsecond)); ok {
			t.Fatalf("line %d logged inside the interval", i)
		}
	}
	if ok, n := th.allow(t0.Add(10 * time.Second)); !ok || n != 41_999 {
		t.Errorf("after the interval = %v, %d; want true, 41999", ok, n)
	}
}

// gauge reads one unlabelled series from /metrics.
func gauge(t *testing.T, ts *faultyServer, name string) string {
	t.Helper()
	w := ts.do("GET", "/metrics", "")
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return ""
}

// A damaged SST that a start from a snapshot never reads is found by the
// background verification: an ERROR, /readyz 503 log_damaged, and the
// verified seq stops before the damage.
func TestBackgroundVerificationFindsDamageTheSnapshotHid(t *testing.T) {
	dir := t.TempDir()
	open := func() (*eventlog.Store, *eventlog.Log, *projections.Projections) {
		t.Helper()
		store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{Create: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
		if err != nil {
			t.Fatal(err)
		}
		state, err := projections.Open(log, projections.DefaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		return store, log, state
	}
	store, log, state := open()
	for i := range 30 {
		if _, err := state.CreateAccount(t.Context(), "cli", "a"+strings.Repeat("x", i), projections.PlanPro, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Flush(); err != nil { // seqs 1..30 in the first SST
		t.Fatal(err)
	}
	if _, err := state.CreateAccount(t.Context(), "cli", "later", projections.PlanPro, 0); err != nil {
		t.Fatal(err)
	}
	state.Close() // saves a snapshot at seq 31
	log.Close()
	store.Flush()
	store.Close()
	ssts, _ := filepath.Glob(filepath.Join(dir, eventlog.PebbleDir, "*.sst"))
	if len(ssts) < 2 {
		t.Fatalf("want at least two SSTs, have %v", ssts)
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 108; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(ssts[0], b, 0o600); err != nil {
		t.Fatal(err)
	}

	store, log, state = open() // from the snapshot: the damaged SST is not read
	defer func() { state.Close(); log.Close(); store.Close() }()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	health := NewHealth(log, nil)
	s := NewServer(Deps{Log: log, State: state, Config: config.Default(), Logger: logger, Health: health})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	health.Verify(ctx, logger) // returns at the break
	if ctx.Err() != nil {
		t.Fatal("the verification did not find the damage")
	}
	req := httptest.NewRequest("GET", "/readyz", nil)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	var ready struct {
		Status      string `json:"status"`
		Reason      string `json:"reason"`
		VerifiedSeq uint64 `json:"verified_seq"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ready); err != nil || w.Code != 503 || ready.Status != "log_damaged" ||
		!strings.Contains(ready.Reason, ".sst") || ready.VerifiedSeq != 0 {
		t.Errorf("/readyz = %d %s; want 503 log_damaged naming the SST, verified_seq 0", w.Code, w.Body)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "first_bad_seq=1") {
		t.Errorf("no ERROR naming seq 1 in the log:\n%s", logs)
	}
}
