package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
	"demosvc/projections/projtest"
)

// BenchmarkImportPeakRSS measures the peak resident memory of `demosvc log
// import`, run as its own process on the built binary, for an export of
// about 1,000,000 events (a third of DEMOSVC_BENCH_SESSIONS sessions, each
// about three events) and, in the same run, for one a tenth of that size.
// The import streams its input in chunks, so the figure grows with the
// state it checks against (the projections), not with the file. Target:
// under 300 MB at 1M events.
func BenchmarkImportPeakRSS(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "demosvc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	full := max(1, projtest.BenchSessions()/3)
	for _, sessions := range []int{full / 10, full} {
		export, events, size := syntheticExport(b, max(1, sessions))
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			var peak int64
			for range b.N {
				dir := filepath.Join(b.TempDir(), "data")
				cmd := exec.Command(bin, "log", "import", "--data", dir, export)
				cmd.Env = withoutBenchEnv(os.Environ())
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("import: %v\n%s", err, out)
				}
				peak = max(peak, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
			}
			b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
			b.ReportMetric(float64(size)/(1<<20), "input-MiB")
		})
	}
}

// syntheticExport writes a synthetic log of n sessions and exports it as
// JSON lines; it returns the file, its events and its size.
func syntheticExport(b *testing.B, sessions int) (string, uint64, int64) {
	b.Helper()
	dir := b.TempDir()
	store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{Create: true, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	if _, _, err := projtest.Synthetic(log, projtest.BenchShape(sessions)); err != nil {
		b.Fatal(err)
	}
	name := filepath.Join(b.TempDir(), "export.jsonl")
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := log.Export(f, 1); err != nil {
		b.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return name, log.DurableSeq(), fi.Size()
}

// withoutBenchEnv drops the benchmarks' own DEMOSVC_BENCH_SESSIONS, which
// the binary would refuse as a variable that names no configuration key.
func withoutBenchEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "DEMOSVC_BENCH_") {
			out = append(out, kv)
		}
	}
	return out
}
