package main

import (
	"log/slog"
	"os"

	"github.com/bytedance/gopkg/util/gctuner"
)

// heapFloor is the heap the collector lets grow to before it runs while
// the live heap is small. With GOGC's default of 100, a live heap of a few
// MiB (a fresh or small data dir) is collected every few MiB allocated,
// about 40 times a second under a read load, and each cycle's fixed costs
// weigh on every request: with the floor, a GET takes 10% less CPU and a
// list of 20 8% less, for 11 MB more RSS under that load (README,
// "About the black-box figures"). GOGC is capped at 500, so below about
// 11 MiB in use the heap grows to six times its size, not to the floor.
// Once the heap in use passes half of it, GOGC is 100 again, and the heap
// grows as it would without it.
const heapFloor = 64 << 20

// GOGC never goes under 100 with the tuner on (its default floor is 50,
// for a heap over the threshold). Set before any goroutine can run a
// tuner: the tuner reads it without synchronisation, so setting it while
// one runs (a second serve in one process, as in the tests) is a race.
func init() { gctuner.SetMinGCPercent(100) }

// tuneGC sets GOGC after every collection so that the heap may reach
// heapFloor (GOGC at most 500, never under 100), unless the GOGC
// environment variable is set: an operator's choice stands. GOMEMLIMIT
// bounds the heap either way. The tuner reads the heap's size with
// runtime.ReadMemStats after each cycle (a stop of the world of
// microseconds). It returns the function that stops the tuner, or nil if
// it did not start one.
func tuneGC(logger *slog.Logger) (stop func()) {
	if v := os.Getenv("GOGC"); v != "" {
		logger.Info("GOGC is set: the collector is left as it says", "GOGC", v)
		return nil
	}
	gctuner.Tuning(heapFloor)
	return func() { gctuner.Tuning(0) }
}
