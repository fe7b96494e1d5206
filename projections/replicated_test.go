package projections

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"demosvc/eventlog"
)

// heldReplicator is a replicated log in memory whose next append can be
// held, then refused with an error that leaves the log going on (a
// timeout, a lost quorum), as a cluster's can.
type heldReplicator struct {
	mu      sync.Mutex
	pos     uint64
	hold    chan struct{} // the next append waits for it to close
	entered chan struct{} // and says so here
	fail    error         // and then fails with this
}

func (r *heldReplicator) Writable() error { return nil }

func (r *heldReplicator) Append(entry []byte, after uint64) (uint64, error) {
	r.mu.Lock()
	hold, entered, fail := r.hold, r.entered, r.fail
	r.hold, r.entered, r.fail = nil, nil, nil
	r.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		<-hold
	}
	if fail != nil {
		return 0, fail
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if after != r.pos {
		return 0, eventlog.ErrStale
	}
	r.pos++
	return r.pos, nil
}

// failNext holds the next append until release is called, then refuses it.
func (r *heldReplicator) failNext() (entered <-chan struct{}, release func()) {
	hold, in := make(chan struct{}), make(chan struct{}, 1)
	r.mu.Lock()
	r.hold, r.entered, r.fail = hold, in, errors.New("nats: timeout")
	r.mu.Unlock()
	return in, func() { close(hold) }
}

// TestAGroupIsNeverDecidedAgainstOneThatFailedToReplicate: a replicated
// log goes on after a refused append, so a command queued behind a group
// whose append failed must be decided against the state without that
// group. Here the command queued is the same request again (its
// Idempotency-Key): decided against the failed group, it found that
// group's answer and replayed it, acknowledging an agent that was in
// neither the log nor the state. The writer chose between finishing the
// failed group and taking the queued command at random, so the case runs
// twenty times.
func TestAGroupIsNeverDecidedAgainstOneThatFailedToReplicate(t *testing.T) {
	repl := &heldReplicator{}
	store, err := eventlog.OpenStore(t.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := &stepClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: NewRegistry(), IDs: eventlog.NewIDs(clock.now), Replicator: repl})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	opts := DefaultOptions
	if opts.Sealer, err = eventlog.NewSealer(make([]byte, eventlog.MasterKeySize), crand.Reader); err != nil {
		t.Fatal(err)
	}
	p, err := Open(log, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	acc, err := p.CreateAccount(ctx, "cli", "acme", PlanPro, 0)
	if err != nil {
		t.Fatal(err)
	}
	pr := Principal{Account: acc, KeyID: "key_test"}
	in := AgentInput{Name: "a", SandboxURL: "https://sandbox.example.com/a"}
	type result struct {
		v   any
		err error
	}
	for try := range 20 {
		idem := func() *Idempotency {
			return &Idempotency{Key: fmt.Sprintf("k%d", try), Fingerprint: "fp", Now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
				Record: func(v any, err error) []byte {
					if err != nil {
						return []byte("error")
					}
					return []byte(v.(AgentView).ID)
				}}
		}
		entered, release := repl.failNext()
		first, retry := make(chan result, 1), make(chan result, 1)
		go func() { v, err := p.CreateAgent(ctx, pr, in, idem()); first <- result{v, err} }()
		waitFor(t, entered, "the first request's append")
		go func() { v, err := p.CreateAgent(ctx, pr, in, idem()); retry <- result{v, err} }()
		pollUntil(t, "the retry to be queued", func() bool { return len(p.queue) == 1 })
		release()
		a, b := waitFor(t, first, "the first answer"), waitFor(t, retry, "the retry's answer")
		if a.err == nil {
			t.Fatalf("try %d: the first request succeeded through a refused append", try)
		}
		if b.err != nil {
			continue // decided after the failed group was undone: refused, or itself failed
		}
		id := string(b.v.(Replay).Response)
		if _, err := p.Agent(acc.ID, id); err != nil {
			t.Fatalf("try %d: the retry was acknowledged with agent %s, which is not there (%v); the first request failed: %v", try, id, err, a.err)
		}
	}
}
