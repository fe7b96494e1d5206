package main

import (
	"bytes"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/bytedance/gopkg/util/gctuner"
)

// serve lets a small heap grow to heapFloor before collecting (GOGC over
// 100 while the heap is small), unless GOGC is set.
func TestTuneGCLetsASmallHeapGrowUnlessGOGCIsSet(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in this environment")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	var logs bytes.Buffer
	t.Setenv("GOGC", "150")
	if stop := tuneGC(slog.New(slog.NewTextHandler(&logs, nil))); stop != nil {
		stop()
		t.Fatal("with GOGC set, tuneGC started the tuner")
	}
	if !strings.Contains(logs.String(), "GOGC=150") {
		t.Errorf("with GOGC set, the log says %q; want it to say GOGC=150 is kept", logs.String())
	}

	os.Unsetenv("GOGC") // t.Setenv restores the unset state after the test
	stop := tuneGC(slog.New(slog.NewTextHandler(&logs, nil)))
	if stop == nil {
		t.Fatal("with GOGC unset, tuneGC started no tuner")
	}
	defer stop()
	// The test binary's heap is a few MiB: after a collection the tuner
	// raises GOGC so that the heap may grow towards heapFloor.
	deadline := time.Now().Add(10 * time.Second)
	for gctuner.GetGCPercent() <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after collections with a small heap; want more than 100", gctuner.GetGCPercent())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the tuner runs in the finalizer goroutine after the cycle
	}
}
