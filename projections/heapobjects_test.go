package projections_test

import (
	"runtime"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
	"demosvc/projections/projtest"
)

// The state of a session with its own contact is a fraction of a heap
// object, not the seven and a half it was: every GC cycle finds and marks
// each object (BenchmarkGCWithState measures what that costs).
func TestStateIsFewHeapObjects(t *testing.T) {
	store, err := eventlog.OpenStore(t.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	const n = 20_000
	if _, _, err := projtest.Synthetic(log, projtest.SyntheticShape{Sessions: n, Agents: 10, Contacts: n}); err != nil {
		t.Fatal(err)
	}
	objects := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapObjects
	}
	check := func(from string, load func() (*projections.State, error)) {
		before := objects()
		s, err := load()
		if err != nil {
			t.Fatal(err)
		}
		perSession := (float64(objects()) - float64(before)) / n
		runtime.KeepAlive(s)
		t.Logf("from the %s: %.3f heap objects per session and its contact", from, perSession)
		if perSession > 0.5 {
			t.Errorf("from the %s: %.2f heap objects per session and its contact, want at most 0.5", from, perSession)
		}
	}
	check("log", func() (*projections.State, error) { return projections.ReplayLog(log, nil) })
	s, err := projections.ReplayLog(log, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("snapshot", func() (*projections.State, error) { return projections.SnapshotRoundTrip(s) })
	runtime.KeepAlive(s)
}
