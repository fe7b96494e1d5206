package delivery

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"demosvc/eventlog"
)

// syncBuffer is a log sink the test reads while loops write to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A store that fails under a delivery loop stops the loop with an ERROR;
// the next event restarts it, and every event is then delivered. The fault
// is a read error (EIO-like) on Pebble's table files, injected with
// errorfs: the one storage fault a test cannot cause for real on demand,
// and one that leaves the store usable once it passes.
func TestALoopStoppedByAStoreFaultRestartsAndDeliversEverything(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir)
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	cfg, clock := clockedConfig()
	cfg.MaxRetries = 10
	w.sessions(t, agent, 0, 50)
	w.start(cfg)
	waitFor(t, "50 deliveries stored, each tried once", pendingAfterOneAttempt(t, w, wh.ID, 50))
	w.close()

	// Reopening flushes what the WAL holds into table files, so the
	// delivery state is now read from files the fault reaches.
	var failing atomic.Bool
	var injected atomic.Int64
	fsys := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsRead {
			injected.Add(1)
			return fmt.Errorf("reading %s: %w", op.Path, errorfs.ErrInjected)
		}
		return nil
	}))
	w = openWorldOn(t, dir, fsys)
	healthy.Store(true)
	var logs syncBuffer
	clock.Advance(time.Second) // ids of this run sort after the last run's
	failing.Store(true)
	w.startLogging(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	waitFor(t, "the loop to stop with an error", func() bool {
		if rv.count() > 50 {
			t.Fatal("the loop delivered: the fault never reached it")
		}
		return strings.Contains(logs.String(), "delivery loop stopped; it restarts at the next event")
	})
	line := logs.String()
	if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "webhook_id="+wh.ID) || !strings.Contains(line, "injected error") {
		t.Errorf("the log says %q; want an ERROR naming the webhook and the fault", line)
	}
	if injected.Load() == 0 {
		t.Fatal("no read failed: the loop stopped for another reason")
	}
	if w.hasLoop(wh.ID) {
		t.Error("the stopped loop is still registered: no later event would restart it")
	}
	if n := rv.count(); n != 50 {
		t.Errorf("the receiver got %d requests while the store failed, want the first run's 50", n)
	}

	// The fault passes; the next event restarts the loop, which resumes
	// the 50 pending deliveries and takes the new event.
	failing.Store(false)
	w.startSession(agent, "after@example.com")
	waitAdvancing(t, clock, time.Second, "51 deliveries succeeded", deliveriesAre(t, w, wh.ID, 51, succeeded))
	seen := map[string]bool{}
	for _, r := range rv.all()[50:] {
		seen[r.header.Get("X-Service-Event-Id")] = true
	}
	if len(seen) != 51 {
		t.Errorf("%d distinct events answered after the fault, want 51", len(seen))
	}
}

// writerReplicator is a cluster's replicated log in memory, for one node
// whose writer role a test takes away and gives back, as a writer that
// stepped down after an append of unknown outcome and fenced again at its
// next lease round sees it.
type writerReplicator struct {
	mu       sync.Mutex
	pos      uint64
	notWrite bool
}

func (r *writerReplicator) set(writes bool) { r.mu.Lock(); r.notWrite = !writes; r.mu.Unlock() }

func (r *writerReplicator) Writable() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notWrite {
		return eventlog.ErrNotWriter
	}
	return nil
}

func (r *writerReplicator) Append(entry []byte, after uint64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notWrite {
		return 0, eventlog.ErrNotWriter
	}
	if after != r.pos {
		return 0, eventlog.ErrStale
	}
	r.pos++
	return r.pos, nil
}

// A loop that ended because its node stopped taking writes is started
// again loopRestartDelay later, with no new event, once the node writes
// again: a writer that fenced again at once keeps its dispatching, and its
// pending deliveries are not left until the next event or prune. While the
// node does not write, the loop is not started again and again.
func TestALoopEndedByLosingTheWriterRoleIsStartedAgain(t *testing.T) {
	repl := &writerReplicator{}
	w := openWorldReplicated(t, "", nil, repl)
	rv, healthy := newSwitchableReceiver(t)
	wh := w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	cfg, clock := clockedConfig()
	cfg.MaxRetries, cfg.Backoff = 10, time.Second
	var logs syncBuffer
	w.startLogging(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	w.startSession(agent, "first@example.com")
	waitFor(t, "the delivery tried once and failed", pendingAfterOneAttempt(t, w, wh.ID, 1))
	// The node stops taking writes: the loop's next write (the retry's
	// outcome) fails, and the loop ends.
	repl.set(false)
	const stopped = "delivery loop stopped: this node no longer writes"
	waitAdvancing(t, clock, time.Second, "the loop to end", func() bool {
		return strings.Contains(logs.String(), stopped) && !w.hasLoop(wh.ID)
	})
	// Not started again and again meanwhile (a restart at once spun
	// thousands of times here). The polls move the clock, so the restart
	// can come due once or twice before the last poll saw the loop gone.
	if n := strings.Count(logs.String(), stopped); n > 3 {
		t.Errorf("the loop ended %d times while the node did not write; want it started again at most once a %v", n, loopRestartDelay)
	}
	// It writes again (fenced anew); no event comes. (The clock moves by
	// the delay at each poll: a restart armed after a move still comes due.)
	repl.set(true)
	healthy.Store(true)
	waitAdvancing(t, clock, loopRestartDelay, "the loop started again, with no new event", func() bool { return w.hasLoop(wh.ID) })
	waitAdvancing(t, clock, time.Second, "the pending delivery succeeded", deliveriesAre(t, w, wh.ID, 1, succeeded))
}
