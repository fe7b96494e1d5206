package projections

import (
	"errors"
	"slices"
	"testing"
)

// Open tells its replay's progress: every replayProgressEvery events with
// the seq reached and the head, and once at the end.
func TestReplayTellsItsProgress(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	for range 10 {
		e.account("A")
	}
	head := e.log.DurableSeq()
	if head < 10 {
		t.Fatalf("head %d", head)
	}

	defer func(every uint64) { replayProgressEvery = every }(replayProgressEvery)
	replayProgressEvery = 3
	var calls [][2]uint64
	if _, err := replayLog(e.log, nil, func(seq, h uint64) { calls = append(calls, [2]uint64{seq, h}) }); err != nil {
		t.Fatal(err)
	}
	var want [][2]uint64
	for seq := uint64(3); seq <= head; seq += 3 {
		want = append(want, [2]uint64{seq, head})
	}
	want = append(want, [2]uint64{head, head})
	if !slices.Equal(calls, want) {
		t.Fatalf("progress %v, want %v", calls, want)
	}

	// Open passes Options.ReplayProgress on: a reopen (from the snapshot
	// Close saved) ends at the head.
	dir := e.dir
	e.close()
	calls = nil
	opts := DefaultOptions
	opts.ReplayProgress = func(seq, h uint64) { calls = append(calls, [2]uint64{seq, h}) }
	e2 := openEnv(t, dir, opts)
	if len(calls) == 0 || calls[len(calls)-1] != [2]uint64{head, head} {
		t.Fatalf("Open's replay progress %v, want it to end at %d of %d", calls, head, head)
	}
	e2.close()
}

// TestAStoppedReplayEnds: its stop channel closed, a replay ends with
// ErrStopped instead of running to the head (Open's, with Options.Stop:
// serve stopped by a signal during a long start).
func TestAStoppedReplayEnds(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	e.agent(pr, "a")
	stopped := make(chan struct{})
	close(stopped)
	if _, err := replayLogTo(e.log, nil, e.log.DurableSeq(), nil, stopped); !errors.Is(err, ErrStopped) {
		t.Fatalf("a replay with its stop closed = %v; want ErrStopped", err)
	}
	s, err := replayLogTo(e.log, nil, e.log.DurableSeq(), nil, make(chan struct{}))
	if err != nil {
		t.Fatalf("a replay with its stop open: %v", err)
	}
	if s.seq != e.log.DurableSeq() {
		t.Fatalf("a replay with its stop open reached seq %d; want the head %d", s.seq, e.log.DurableSeq())
	}
}
