package projections

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/eventlog/eventlogtest"
)

// These tests hold the writer to its invariant, on the path the binary
// runs (Do, one Txn per group, one fsync): nothing is acknowledged, shown
// to a reader or handed to the log's followers before its fsync returns,
// and a failed commit leaves the state equal to the durable log.

// openFaultyEnv opens a store whose WAL writes and syncs the test controls.
func openFaultyEnv(t *testing.T) (*env, *eventlogtest.WALFaults) {
	t.Helper()
	fs, faults := eventlogtest.NewFS(nil)
	clock := &stepClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	return openEnvOn(t, "", DefaultOptions, eventlog.StoreOptions{FS: fs, Logger: slog.New(slog.DiscardHandler)}, clock.now), faults
}

// seqOf is a Result that reports the seq of the command's last event.
func seqOf(s *State) any { return s.Seq() }

func TestReadersNeverSeeAnUnsyncedCommand(t *testing.T) {
	// A fresh store, so the one fsync the test holds is the command's own.
	e, faults := openFaultyEnv(t)
	entered, release := faults.HoldSyncs()
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := e.p.CreateAccount(context.Background(), "cli", "held", PlanPro, 0)
		done <- err
	}()
	select {
	case <-entered: // the group is in Pebble's memtable; its WAL sync is held
	case <-time.After(30 * time.Second):
		t.Fatal("the writer never reached its fsync")
	}

	// The writer holds the state until the fsync returns: a reader waits
	// rather than see the new account.
	if e.p.mu.TryRLock() {
		e.p.mu.RUnlock()
		t.Error("the state is readable while the group's fsync is held")
	}
	select {
	case err := <-done:
		t.Fatalf("the command was acknowledged (err %v) while its fsync was held", err)
	default:
	}
	if got := e.log.DurableSeq(); got != 0 {
		t.Errorf("DurableSeq while the fsync is held = %d, want 0", got)
	}
	n := 0
	if err := e.log.Read(1, 0, func(*eventlog.Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("Read while the fsync is held returned %d records, want 0", n)
	}

	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("CreateAccount: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not return after the fsync was released")
	}
	if got := e.log.DurableSeq(); got != 1 {
		t.Errorf("DurableSeq after the fsync = %d, want 1", got)
	}
	if accs := e.p.Accounts(); len(accs) != 1 || accs[0].Name != "held" {
		t.Errorf("accounts after the fsync = %+v, want the held one", accs)
	}
}

func TestConcurrentCommandsShareCommitsAndKeepTheChain(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	const writers, each = 64, 20
	var wg sync.WaitGroup
	seqs := make(chan uint64, writers*each)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				v, err := e.p.Do(context.Background(), Command{
					Account: pr.Account.ID, Actor: "key_test",
					Decide: func(s *State) ([]any, []eventlog.Put, error) {
						ev := &AgentCreated{AgentID: e.log.IDs().New(PrefixAgent), Name: "a", SandboxURL: "https://sandbox.example.com/", Status: AgentActive}
						return []any{ev}, nil, nil
					},
					Result: seqOf,
				})
				if err != nil {
					t.Error(err)
					return
				}
				seqs <- v.(uint64)
			}
		}()
	}
	wg.Wait()
	close(seqs)
	first := e.log.DurableSeq() - writers*each + 1
	got := map[uint64]bool{}
	for s := range seqs {
		if got[s] {
			t.Errorf("seq %d acknowledged to two commands", s)
		}
		got[s] = true
	}
	for s := first; s < first+writers*each; s++ {
		if !got[s] {
			t.Errorf("seq %d acknowledged to no command", s)
		}
	}
	if n, err := e.log.Verify(); err != nil || n != e.log.DurableSeq() {
		t.Errorf("Verify = %d, %v; want %d, nil", n, err, e.log.DurableSeq())
	}
	replayed, err := ReplayLog(e.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	var live string
	e.p.View(func(s *State) { live = dump(s) })
	if got := dump(replayed); got != live {
		t.Errorf("live state differs from a replay of the log:\nlive:\n%s\nreplay:\n%s", live, got)
	}
}

func TestFailedFsyncAcknowledgesNothingAndRebuildsFromTheLog(t *testing.T) {
	for _, tc := range eventlogtest.Faults {
		t.Run(tc.Name, func(t *testing.T) {
			e, faults := openFaultyEnv(t)
			pr := e.account("acme")
			kept := e.agent(pr, "kept")
			durable := e.log.DurableSeq()
			var want string
			e.p.View(func(s *State) { want = dump(s) })

			tc.Inject(faults)
			_, err := e.p.CreateAgent(context.Background(), pr, AgentInput{Name: "lost", SandboxURL: "https://sandbox.example.com/"}, nil)
			if !errors.Is(err, eventlog.ErrUnavailable) {
				t.Fatalf("CreateAgent with a failing WAL = %v, want ErrUnavailable", err)
			}
			faults.Clear()

			var got string
			e.p.View(func(s *State) { got = dump(s) })
			if got != want {
				t.Errorf("the state after the failed commit is not the durable log's:\ngot:\n%s\nwant:\n%s", got, want)
			}
			if e.log.DurableSeq() != durable {
				t.Errorf("DurableSeq = %d after a failed commit, want %d", e.log.DurableSeq(), durable)
			}
			// The failure is sticky: whether the batch reached the disk is
			// unknown, so no later write may be acknowledged.
			if _, err := e.p.CreateAgent(context.Background(), pr, AgentInput{Name: "later", SandboxURL: "https://sandbox.example.com/"}, nil); !errors.Is(err, eventlog.ErrUnavailable) {
				t.Errorf("CreateAgent after the failure = %v, want ErrUnavailable", err)
			}
			// Reads go on.
			if v, err := e.p.Agent(pr.Account.ID, kept.ID); err != nil || v.Name != "kept" {
				t.Errorf("reading after the failure = %+v, %v", v, err)
			}
		})
	}
}
