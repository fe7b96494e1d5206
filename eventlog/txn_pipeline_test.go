package eventlog

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// A started transaction's batch is handed to Pebble at once, so the next
// fsync carries it without waiting for the earlier commit to return; it
// still becomes durable, visible and acknowledged only after that commit.

// startHeld starts a transaction of one event while WAL syncs are held.
func startHeld(t *testing.T, h *harness, n int) (*Flight, Record) {
	t.Helper()
	tx, err := h.log.Begin()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := tx.Add([]Event{{Account: "acc_1", Actor: "cli", Payload: note{Text: "pipelined", N: n}}})
	if err != nil {
		t.Fatal(err)
	}
	return tx.Start(), recs[0]
}

// inPebble reports whether the record's key has reached Pebble (its
// memtable), whatever its fsync's state.
func inPebble(h *harness, seq uint64) bool {
	_, closer, err := h.store.db.Get(logKey(seq))
	if err != nil {
		return false
	}
	closer.Close()
	return true
}

// awaitEntered waits for the held fsync of the first transaction, A.
func awaitEntered(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("A never reached its fsync")
	}
}

func awaitFlight(t *testing.T, f *Flight, what string) error {
	t.Helper()
	select {
	case <-f.Done():
		return f.Wait()
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

func TestTheNextCommitReachesPebbleWhileOneSyncs(t *testing.T) {
	h := openHarness(t, "")
	h.append(1)
	entered, release := h.faults.HoldSyncs()
	defer release()
	a, recA := startHeld(t, h, 1)
	awaitEntered(t, entered)
	b, recB := startHeld(t, h, 2)
	if recB.Seq != recA.Seq+1 {
		t.Fatalf("B's seq %d does not follow A's %d", recB.Seq, recA.Seq)
	}
	// B was handed to Pebble while A's fsync is held: Pebble's log writer
	// syncs it as soon as A's fsync returns.
	if !inPebble(h, recB.Seq) {
		t.Error("B's batch did not reach Pebble while A's fsync was held")
	}
	select {
	case <-b.Done():
		t.Fatalf("B ended (err %v) while A's fsync was held", b.Wait())
	default:
	}
	if got := h.log.DurableSeq(); got != recA.Seq-1 {
		t.Errorf("DurableSeq while A's fsync is held = %d, want %d", got, recA.Seq-1)
	}
	release()
	if err := awaitFlight(t, a, "A"); err != nil {
		t.Fatalf("A: %v", err)
	}
	if err := awaitFlight(t, b, "B"); err != nil {
		t.Fatalf("B: %v", err)
	}
	if got := h.log.DurableSeq(); got != recB.Seq {
		t.Errorf("DurableSeq after both = %d, want %d", got, recB.Seq)
	}
	if got := len(h.all()); got != int(recB.Seq) {
		t.Errorf("readable records = %d, want %d", got, recB.Seq)
	}
}

func TestACommitStartedAfterAFailedOneFailsToo(t *testing.T) {
	h := openHarness(t, "")
	h.append(1)
	before := h.log.DurableSeq()
	// A's fsync will fail, once released.
	h.faults.FailSyncs(syscall.EIO)
	entered, release := h.faults.HoldSyncs()
	defer release()
	a, _ := startHeld(t, h, 1)
	awaitEntered(t, entered)
	// Only A's fsync fails: B's own would succeed, but B must not be
	// acknowledged after a commit before it failed.
	h.faults.FailSyncs(nil)
	b, _ := startHeld(t, h, 2)
	release()
	errA := awaitFlight(t, a, "A")
	errB := awaitFlight(t, b, "B")
	if !errors.Is(errA, ErrUnavailable) || !errors.Is(errB, ErrUnavailable) {
		t.Fatalf("A: %v, B: %v; want both ErrUnavailable", errA, errB)
	}
	if got := h.log.DurableSeq(); got != before {
		t.Errorf("DurableSeq after the failed commits = %d, want %d", got, before)
	}
	if got := len(h.all()); got != int(before) {
		t.Errorf("readable records = %d, want %d", got, before)
	}
	if _, err := h.log.Begin(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Begin after a failed commit: %v, want ErrUnavailable", err)
	}
}
