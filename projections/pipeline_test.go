package projections

import (
	"context"
	"testing"
	"time"

	"demosvc/eventlog"
)

// The writer pipelines groups (writer.go): these tests hold the WAL's
// fsyncs so that one group is durable while the next is decided and
// applied but not yet synced, and check that no reader sees that one.

// waitFor fails t unless ch yields within the deadline.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestReadersNeverSeeAPendingGroup(t *testing.T) {
	e, faults := openFaultyEnv(t)
	pr := e.account("acme")
	ctx := context.Background()

	// Group A reaches its fsync, which is held.
	enteredA, releaseA := faults.HoldSyncs()
	defer releaseA()
	doneA := make(chan error, 1)
	go func() {
		_, err := e.p.CreateAgent(ctx, pr, AgentInput{Name: "a", SandboxURL: "https://sandbox.example.com/a"}, nil)
		doneA <- err
	}()
	waitFor(t, enteredA, "group A's fsync")

	// Group B is decided while A syncs.
	decided := make(chan string, 1)
	doneB := make(chan error, 1)
	go func() {
		_, err := e.p.Do(ctx, Command{
			Account: pr.Account.ID, Actor: "key_test",
			Decide: func(s *State) ([]any, []eventlog.Put, error) {
				ev := &AgentCreated{AgentID: e.log.IDs().New(PrefixAgent), Name: "b", SandboxURL: "https://sandbox.example.com/b", Status: AgentActive}
				decided <- ev.AgentID
				return []any{ev}, nil, nil
			},
		})
		doneB <- err
	}()
	idB := waitFor(t, decided, "group B to be decided while group A's fsync is held (the writer does not pipeline)")

	// A's fsync returns; B's is held.
	enteredB, releaseB := faults.HoldSyncs()
	defer releaseB()
	releaseA()
	if err := waitFor(t, doneA, "group A's answer"); err != nil {
		t.Fatalf("group A: %v", err)
	}
	waitFor(t, enteredB, "group B's fsync")
	durableA := e.log.DurableSeq()

	// Any reader that gets in now must not see B.
	if e.p.mu.TryRLock() {
		id, _ := ParseID(PrefixAgent, idB)
		if e.p.state.agents[id] != nil {
			t.Error("a reader sees group B while its fsync is held")
		}
		if e.p.state.seq > durableA {
			t.Errorf("a reader sees seq %d, past the durable %d", e.p.state.seq, durableA)
		}
		e.p.mu.RUnlock()
	}
	select {
	case err := <-doneB:
		t.Fatalf("group B was answered (err %v) while its fsync was held", err)
	default:
	}

	releaseB()
	if err := waitFor(t, doneB, "group B's answer"); err != nil {
		t.Fatalf("group B: %v", err)
	}
	if v, err := e.p.Agent(pr.Account.ID, idB); err != nil || v.Name != "b" {
		t.Errorf("agent B after its fsync = %+v, %v", v, err)
	}
}

func TestAuthenticationChangesOnlyWhenDurable(t *testing.T) {
	e, faults := openFaultyEnv(t)
	pr := e.account("acme")
	ctx := context.Background()
	key, err := e.p.CreateKey(ctx, "cli", pr.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.p.Authenticate(key.Key); !ok {
		t.Fatal("a new key does not authenticate once acknowledged")
	}

	entered, release := faults.HoldSyncs()
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := e.p.RevokeKey(ctx, "cli", key.ID)
		done <- err
	}()
	waitFor(t, entered, "the revocation's fsync")
	// Authenticate does not wait for the state: it reads the published
	// index, which must not move before the revocation is durable.
	if _, ok := e.p.Authenticate(key.Key); !ok {
		t.Error("the key is refused before its revocation is durable")
	}
	release()
	if err := waitFor(t, done, "the revocation"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.p.Authenticate(key.Key); ok {
		t.Error("the key still authenticates after its revocation was acknowledged")
	}
}

// doneCounter is a context that counts how often its Done channel is
// asked for.
type doneCounter struct {
	context.Context
	calls int
}

func (c *doneCounter) Done() <-chan struct{} { c.calls++; return c.Context.Done() }

// TestDoAsksForDoneOnlyWhenTheWriterIsBehind: a command that finds room in
// the queue never asks its context for Done (net/http's request context
// allocates the channel then); one that finds the queue full waits on it,
// and leaves with the context's error when it ends first.
func TestDoAsksForDoneOnlyWhenTheWriterIsBehind(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	nothing := Command{Decide: func(*State) ([]any, []eventlog.Put, error) { return nil, nil, nil }}

	ctx := &doneCounter{Context: context.Background()}
	if _, err := e.p.Do(ctx, nothing); err != nil {
		t.Fatal(err)
	}
	if ctx.calls != 0 {
		t.Errorf("a command queued at once asked for Done %d times", ctx.calls)
	}

	// The writer takes one command and waits for the state's lock, held
	// here; maxGroup more fill the queue.
	e.p.mu.Lock()
	locked := true
	defer func() {
		if locked {
			e.p.mu.Unlock()
		}
	}()
	errs := make(chan error, maxGroup+1)
	for range maxGroup + 1 {
		go func() {
			_, err := e.p.Do(context.Background(), nothing)
			errs <- err
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(e.p.queue) < cap(e.p.queue) {
		if time.Now().After(deadline) {
			t.Fatalf("the queue holds %d of %d", len(e.p.queue), cap(e.p.queue))
		}
		time.Sleep(time.Millisecond)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ctx = &doneCounter{Context: cancelled}
	if _, err := e.p.Do(ctx, nothing); err != context.Canceled {
		t.Errorf("a cancelled command facing a full queue: %v, want context.Canceled", err)
	}
	if ctx.calls == 0 {
		t.Error("a command facing a full queue did not wait on its context")
	}
	e.p.mu.Unlock()
	locked = false
	for range maxGroup + 1 {
		if err := waitFor(t, errs, "the queued commands"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuthenticateAllocatesNothing: every authenticated request hashes its
// key, so the hash is taken from the stack.
func TestAuthenticateAllocatesNothing(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	key, err := e.p.CreateKey(context.Background(), "cli", pr.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := e.p.Authenticate(key.Key); !ok {
			t.Fatal("the key does not authenticate")
		}
	})
	if allocs != 0 {
		t.Errorf("Authenticate allocates %.1f times a call", allocs)
	}
}

// TestDoReusesTheCommandsEnvelope: a command's envelope and the channel
// its outcome comes back on are reused from one command to the next; what
// Do still allocates is the writer's group.
func TestDoReusesTheCommandsEnvelope(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	nothing := Command{Decide: func(*State) ([]any, []eventlog.Put, error) { return nil, nil, nil }}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := e.p.Do(ctx, nothing); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.1f allocations per Do", allocs)
	// 11 with an envelope and a channel per command; 8 reusing them, and
	// up to 9 under the race detector, whose pools drop a quarter of what
	// they are given.
	if allocs > 9 {
		t.Errorf("Do allocates %.1f times, want at most 9", allocs)
	}
}

// TestCloseWaitsForABackgroundSnapshot: Close returns only once a
// snapshot started in the background has ended, and none starts after it:
// its caller closes the log and the store next, which a snapshot still
// writing would find closed under it.
func TestCloseWaitsForABackgroundSnapshot(t *testing.T) {
	opts := DefaultOptions
	opts.SnapshotEvery = 1
	e := openEnv(t, "", opts)
	e.account("acme")
	pollUntil(t, "the writer's snapshot", func() bool { return e.p.snapSeq.Load() == e.p.Seq() && !e.p.snapRunning.Load() })

	e.p.snapMu.Lock() // the next snapshot waits here, as behind a long one
	if !e.p.maybeSnapshot(e.p.Seq() + 1) {
		e.p.snapMu.Unlock()
		t.Fatal("no background snapshot started")
	}
	closed := make(chan struct{})
	go func() {
		e.p.Close()
		close(closed)
	}()
	e.p.snapMu.Unlock()
	<-closed
	if e.p.snapRunning.Load() {
		t.Error("Close returned while a background snapshot was still running")
	}
	if e.p.maybeSnapshot(e.p.Seq() + 1000) {
		t.Error("a background snapshot started after Close")
	}
}
