package http

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"syscall"
	"testing"
	"time"

	"demosvc/config"
	"demosvc/eventlog"
	"demosvc/eventlog/eventlogtest"
	"demosvc/projections"
)

// A failed fsync under the projections writer answers 503, acknowledges
// nothing, and leaves the state equal to the durable log; reads go on.
func TestFailedFsyncAnswers503AndAcknowledgesNothing(t *testing.T) {
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
	s := NewServer(Deps{Log: log, State: state, Config: config.Default(), Logger: slog.New(slog.DiscardHandler)})
	ts := &testServer{Server: s, state: state, key: key.Key}

	if w := ts.do("POST", "/v1/agents", `{"name":"kept","sandbox_url":"https://sandbox.example.com/"}`, "Content-Type", "application/json"); w.Code != http.StatusCreated {
		t.Fatalf("create before the fault = %d %s", w.Code, w.Body)
	}
	durable := log.DurableSeq()

	faults.FailSyncs(syscall.EIO)
	w := ts.do("POST", "/v1/agents", `{"name":"lost","sandbox_url":"https://sandbox.example.com/"}`, "Content-Type", "application/json")
	faults.FailSyncs(nil)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("create with a failing fsync = %d %s, want 503", w.Code, w.Body)
	}
	if e := errorOf(t, w); e.Code != "unavailable" {
		t.Errorf("error = %+v, want code unavailable", e)
	}
	if log.DurableSeq() != durable {
		t.Errorf("DurableSeq = %d after the failed commit, want %d", log.DurableSeq(), durable)
	}

	w = ts.do("GET", "/v1/agents", "")
	if w.Code != http.StatusOK {
		t.Fatalf("list after the failure = %d %s, want 200 (reads go on)", w.Code, w.Body)
	}
	var list struct {
		Data []struct{ Name string } `json:"data"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 1 || list.Data[0].Name != "kept" {
		t.Errorf("agents after the failed commit = %+v, want only the one acknowledged before it", list.Data)
	}
}
