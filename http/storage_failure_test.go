package http

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/eventlog/eventlogtest"
	"demosvc/projections"
)

// faultyServer runs the real stack on a store whose WAL the test breaks.
type faultyServer struct {
	*testServer
	log    *eventlog.Log
	faults *eventlogtest.WALFaults
}

func newFaultyServer(t *testing.T) *faultyServer {
	t.Helper()
	fs, faults := eventlogtest.NewFS(nil)
	ts := openTestServerOn(t, t.TempDir(), nil, eventlog.StoreOptions{FS: fs, Logger: slog.New(slog.DiscardHandler)})
	return &faultyServer{testServer: ts, log: ts.deps.Log, faults: faults}
}

// A failed WAL write or fsync under the projections writer answers 503,
// acknowledges nothing and leaves the state equal to the durable log; the
// service then says it is read-only until a restart, on /readyz and in a
// gauge, and logs the refusals without flooding.
func TestAStorageFailureMakesTheServiceReadOnlyAndSaysSo(t *testing.T) {
	for _, tc := range eventlogtest.Faults {
		t.Run(tc.Name, func(t *testing.T) {
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
			if got := gauge(t, ts.testServer, "demosvc_read_only"); got != "0" {
				t.Errorf("demosvc_read_only before the fault = %s, want 0", got)
			}
			durable := ts.log.DurableSeq()

			tc.Inject(ts.faults)
			w := ts.do("POST", "/v1/agents", `{"name":"lost","sandbox_url":"https://sandbox.example.com/"}`, "Content-Type", "application/json")
			ts.faults.Clear()
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
			if got := gauge(t, ts.testServer, "demosvc_read_only"); got != "1" {
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
func gauge(t *testing.T, ts *testServer, name string) string {
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
	ts := openTestServer(t, dir, nil)
	for i := range 30 {
		if _, err := ts.state.CreateAccount(t.Context(), "cli", "a"+strings.Repeat("x", i), projections.PlanPro, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.store.Flush(); err != nil { // the log so far in the first SST
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, eventlog.PebbleDir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("want the one SST of the flush, have %v", ssts)
	}
	if _, err := ts.state.CreateAccount(t.Context(), "cli", "later", projections.PlanPro, 0); err != nil {
		t.Fatal(err)
	}
	ts.close() // saves a snapshot past the first SST (ingested as an SST of its own)
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

	ts = openTestServer(t, dir, nil) // from the snapshot: the damaged SST is not read
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ts.deps.Health.Verify(ctx, ts.deps.Logger) // returns at the break
	if ctx.Err() != nil {
		t.Fatal("the verification did not find the damage")
	}
	w := ts.do("GET", "/readyz", "")
	var ready struct {
		Status      string `json:"status"`
		Reason      string `json:"reason"`
		VerifiedSeq uint64 `json:"verified_seq"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ready); err != nil || w.Code != 503 || ready.Status != "log_damaged" ||
		!strings.Contains(ready.Reason, ".sst") || ready.VerifiedSeq != 0 {
		t.Errorf("/readyz = %d %s; want 503 log_damaged naming the SST, verified_seq 0", w.Code, w.Body)
	}
	if got := gauge(t, ts, "demosvc_log_damaged"); got != "1" {
		t.Errorf("demosvc_log_damaged = %s, want 1", got)
	}
	if !strings.Contains(ts.logs.String(), "level=ERROR") || !strings.Contains(ts.logs.String(), "first_bad_seq=1") {
		t.Errorf("no ERROR naming seq 1 in the log:\n%s", ts.logs)
	}
}
