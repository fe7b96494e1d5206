package projections_test

import (
	"runtime"
	"testing"

	"demosvc/projections"
	"demosvc/projections/projtest"
)

// The state of a session with its own contact is a fraction of a heap
// object, not the seven and a half it was: every GC cycle finds and marks
// each object (BenchmarkGCWithState measures what that costs).
func TestStateIsFewHeapObjects(t *testing.T) {
	const n = 20_000
	_, store, log := openShape(t, projtest.SyntheticShape{Sessions: n, Agents: 10, Contacts: n})
	defer store.Close()
	defer log.Close()
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
	// A first replay fills the store's caches (under -race, Pebble keeps
	// its cached blocks on the Go heap), so that the one measured counts
	// the state alone; it is the snapshot's source too.
	s, err := projections.ReplayLog(log, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("log", func() (*projections.State, error) { return projections.ReplayLog(log, nil) })
	check("snapshot", func() (*projections.State, error) { return projections.SnapshotRoundTrip(s) })
	runtime.KeepAlive(s)
}
