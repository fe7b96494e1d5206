package projections_test

import (
	"runtime"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
	"demosvc/projections/projtest"
)

// openSynthetic writes a synthetic log of projtest.BenchSessions()
// sessions into a new store and returns it open, without projections.
func openSynthetic(b *testing.B) (string, *eventlog.Store, *eventlog.Log) {
	return openShape(b, projtest.BenchShape(projtest.BenchSessions()))
}

// openShape writes a synthetic log of shape into a new store and returns
// it open, without projections.
func openShape(tb testing.TB, shape projtest.SyntheticShape) (string, *eventlog.Store, *eventlog.Log) {
	tb.Helper()
	dir := tb.TempDir()
	store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{Create: true})
	if err != nil {
		tb.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	if _, _, err := projtest.Synthetic(log, shape); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("wrote %d events for %d sessions in %v", log.DurableSeq(), shape.Sessions, time.Since(start))
	return dir, store, log
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemoryPerSession reports the heap the projections take per
// session with projtest.BenchSessions() sessions loaded (contacts, agents and every
// index included). Target: at most 400 B/session at 1,000,000.
func BenchmarkMemoryPerSession(b *testing.B) {
	_, store, log := openSynthetic(b)
	defer store.Close()
	defer log.Close()
	b.ResetTimer()
	var perSession float64
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		state, err := projections.ReplayLog(log, nil)
		if err != nil {
			b.Fatal(err)
		}
		after := heapInUse()
		perSession = float64(after-before) / float64(projections.SessionCount(state))
		runtime.KeepAlive(state)
	}
	b.ReportMetric(perSession, "heap-B/session")
	if used, err := store.DiskUsage(eventlog.KeyspaceLog); err == nil {
		b.ReportMetric(float64(used)/float64(log.DurableSeq()), "disk-B/event")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkStartup reports how long Open takes with projtest.BenchSessions()
// sessions (about three events each): from a snapshot, and replaying the
// whole log. Target: at most 2 s with a snapshot at 1,000,000.
func BenchmarkStartup(b *testing.B) {
	_, store, log := openSynthetic(b)
	defer store.Close()
	defer log.Close()
	var withSnap, without time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		store.WriteSync(nil, projections.SnapMetaKey, append(projections.SnapMetaKey, 0xff))
		// A start-up is a new process: no earlier state's garbage to sweep
		// (here, the last iteration's), which made the figures vary by 50%.
		runtime.GC()
		start := time.Now()
		p, err := projections.Open(log, projections.DefaultOptions)
		if err != nil {
			b.Fatal(err)
		}
		without += time.Since(start)
		if p.LoadInfo().SnapshotSeq != 0 {
			b.Fatal("a snapshot was used")
		}
		if _, err := p.SaveSnapshot(); err != nil {
			b.Fatal(err)
		}
		p.Close()
		runtime.GC()
		start = time.Now()
		p, err = projections.Open(log, projections.DefaultOptions)
		if err != nil {
			b.Fatal(err)
		}
		withSnap += time.Since(start)
		if p.LoadInfo().SnapshotSeq == 0 {
			b.Fatalf("the snapshot was not used: %s", p.LoadInfo().Ignored)
		}
		p.Close()
	}
	b.ReportMetric(withSnap.Seconds()/float64(b.N), "s-with-snapshot")
	b.ReportMetric(without.Seconds()/float64(b.N), "s-full-replay")
	b.ReportMetric(float64(log.DurableSeq()), "events")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPayloadDecode reads every record of the synthetic log and
// decodes its payload twice, in the same run: as replay does
// (DecodeStored: the hand-written decoders of decoders.go, reflection for
// the rest) and through msgpack's reflection alone, the baseline. It
// reports both rates and their ratio. Target: at least 1,000,000 events/s.
func BenchmarkPayloadDecode(b *testing.B) {
	_, store, log := openSynthetic(b)
	defer store.Close()
	defer log.Close()
	reg := log.Registry()
	rate := func(decode func(*eventlog.Record) (any, error)) float64 {
		start := time.Now()
		err := log.Read(1, 0, func(rec *eventlog.Record) error {
			_, err := decode(rec)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return float64(log.DurableSeq()) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	var fast, slow float64
	for i := 0; i < b.N; i++ {
		fast += rate(reg.DecodeStored)
		slow += rate(reg.DecodeStoredReflective)
	}
	b.ReportMetric(fast/float64(b.N), "events/s")
	b.ReportMetric(slow/float64(b.N), "reflective-events/s")
	b.ReportMetric(fast/slow, "ratio")
	b.ReportMetric(0, "ns/op")
}
