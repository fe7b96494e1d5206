package projections_test

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"demosvc/projections"
	"demosvc/projections/projtest"
)

// BenchmarkGCWithState reports what one full garbage collection costs with
// projtest.BenchSessions() sessions loaded, each with its own contact (the
// shape of issue 14's growth benchmark), against the same collection with
// nothing loaded: every GC cycle marks the whole state, so this is the
// cost that grows with it.
func BenchmarkGCWithState(b *testing.B) {
	n := projtest.BenchSessions()
	_, store, log := openShape(b, projtest.SyntheticShape{Sessions: n, Agents: 100, Contacts: n})
	defer store.Close()
	defer log.Close()
	gc := func() (time.Duration, uint64) {
		runtime.GC()
		var cpu time.Duration
		const rounds = 5
		for range rounds {
			start := time.Now()
			runtime.GC()
			cpu += time.Since(start)
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return cpu / rounds, m.HeapAlloc
	}
	base, baseHeap := gc()
	state, err := projections.ReplayLog(log, nil)
	if err != nil {
		b.Fatal(err)
	}
	took, heap := gc()
	runtime.KeepAlive(state)
	debug.FreeOSMemory()
	b.ReportMetric(float64(took.Microseconds())/1000, "gc-ms")
	b.ReportMetric(float64(base.Microseconds())/1000, "empty-gc-ms")
	b.ReportMetric(float64(heap-baseHeap)/float64(n), "heap-B/session")
	b.ReportMetric(float64(took.Nanoseconds())/float64(heap-baseHeap)*1000, "gc-ps/heap-byte")
	b.ReportMetric(0, "ns/op")
}
