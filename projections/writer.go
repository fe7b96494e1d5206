package projections

import (
	"context"
	"fmt"
	"sync"
	"time"

	"demosvc/eventlog"
)

// The single writer. A command goes to the writer goroutine, which checks
// it against the current state and decides its events. The writer takes
// every command queued at that moment as one group: it adds each command's
// events to one log transaction and applies them to the state at once, so a
// later command of the group is checked against the effects of the earlier
// ones. A group that fails to commit, or a command that produced an event
// the state cannot apply, sends the state back to what the durable log says
// (rebuild).
//
// Groups are pipelined: while group N's fsync runs, the writer decides
// group N+1 against the state with N applied, and starts its commit, which
// the log orders after N's (eventlog.Txn.Start), and so on for every group
// decided before N's fsync returns: each batch is in Pebble's WAL queue as
// soon as it is decided, so the fsync after N's carries them without a
// goroutine hand-off between the two (a gap that left the disk idle 60% of
// the time under 64 writing clients). Readers never see any of them
// before it is durable: the writer holds the state's write lock from
// deciding a group until the fsync of the last group it decided returns.
// So that readers are not kept out for long, it decides no further group
// while a reader waits (readers counts them), nor after a group that
// changed who can authenticate, whose published index (auth.go) is rebuilt
// from the state when nothing undurable is left in it. Commands are
// answered as their own group's fsync returns.

// Command is one change request.
type Command struct {
	Account string // the account the events belong to
	Actor   string // API key id, or "cli"
	// Decide checks the command against s and returns the payloads
	// (pointers to registered types) of the events it causes, in order, and
	// any puts to commit with them. It runs on the writer goroutine; it must
	// not block and must not change s. An empty result changes nothing.
	Decide func(s *State) ([]any, []eventlog.Put, error)
	// Result, if set, builds the answer from the state after the events
	// are applied. It must return values, not pointers into s.
	Result func(s *State) any
	// ResultOf, if set instead of Result, builds the answer from the state
	// and the command's records (their ids and times), as Result does.
	ResultOf func(s *State, recs []eventlog.Record) any
	// Idem, if set, makes the command idempotent under a key; the answer is
	// then a Replay.
	Idem *Idempotency
}

type pending struct {
	cmd  Command
	done chan outcome // buffered: the writer never waits to answer
}

// pendings keeps commands' envelopes, with their channels, between
// commands: one a request, garbage as soon as it was answered.
var pendings = sync.Pool{New: func() any { return &pending{done: make(chan outcome, 1)} }}

// release returns req to pendings. Its channel must be empty: never
// queued, or its outcome received.
func (req *pending) release() {
	req.cmd = Command{}
	pendings.Put(req)
}

type outcome struct {
	value   any
	records []eventlog.Record
	err     error
}

// maxGroup caps the commands one group commit takes.
const maxGroup = 1024

// Do runs cmd on the writer and returns its Result once its events are
// durable and applied. Errors are *Error for a refused command,
// eventlog.ErrUnavailable when storage failed, and eventlog.ErrClosed.
func (p *Projections) Do(ctx context.Context, cmd Command) (any, error) {
	req := pendings.Get().(*pending)
	req.cmd = cmd
	select {
	case <-p.stop:
		req.release()
		return nil, eventlog.ErrClosed
	default:
	}
	select {
	case p.queue <- req:
		// The queue had room, as it nearly always has: the context's Done
		// channel, which net/http's request context allocates when first
		// asked for it, is only asked for when the writer is behind.
	default:
		select {
		case p.queue <- req:
		case <-p.stop:
			req.release()
			return nil, eventlog.ErrClosed
		case <-ctx.Done():
			req.release()
			return nil, ctx.Err()
		}
	}
	// Once queued, the command is decided and committed whatever the
	// caller does; waiting for it keeps "acknowledged" meaning "durable".
	select {
	case out := <-req.done:
		// The writer is done with req once it has sent the outcome.
		req.release()
		return out.value, out.err
	case <-p.stopped:
		select {
		case out := <-req.done:
			return out.value, out.err
		default:
			return nil, eventlog.ErrClosed
		}
	}
}

// maybeSnapshot starts a background snapshot when snapshotInterval events
// have passed since the last one, and reports whether it did. It runs
// beside the writer: neither waits for more than one step of its encoding.
func (p *Projections) maybeSnapshot(seq uint64) bool {
	every := snapshotInterval(p.opts.SnapshotEvery, p.snapSize.Load())
	if every == 0 || seq < p.snapSeq.Load()+every {
		return false
	}
	p.snapGo.Lock()
	defer p.snapGo.Unlock()
	if p.snapClosed || !p.snapRunning.CompareAndSwap(false, true) {
		return false
	}
	p.snapDone.Add(1)
	go func() {
		defer p.snapDone.Done()
		defer p.snapRunning.Store(false)
		p.snapshot()
	}()
	return true
}

// snapshotBytesPerEvent scales the interval between snapshots with the
// state: a snapshot's cost grows with the state (about 2 s of one core
// for the 200 MB of a million sessions), so a fixed interval made it a
// growing share of every write: 11% of the server's CPU at a million
// sessions, where it was none at the start (issue 14's growth benchmark,
// profiled with perf). One event per 512 bytes of the last snapshot keeps
// it near 5%; the replay after a crash grows to at most that many events
// (400,000 at a million sessions, about 0.6 s).
const snapshotBytesPerEvent = 512

// snapshotInterval is how many events pass between two snapshots: every
// (snapshot.every; 0 = only at Close), or more for a large state, judged by
// the size of the last snapshot this process wrote.
func snapshotInterval(every int, lastSize int64) uint64 {
	if every <= 0 {
		return 0
	}
	return max(uint64(every), uint64(lastSize)/snapshotBytesPerEvent)
}

func (p *Projections) snapshot() {
	start := time.Now()
	seq, err := p.SaveSnapshot()
	if err != nil {
		p.opts.Logger.Error("snapshot failed", "err", err)
		return
	}
	p.snapSeq.Store(seq)
	p.opts.Logger.Info("snapshot saved", "seq", seq, "took", time.Since(start))
	// The head mark moves with each snapshot, so that a WAL or SST that
	// later loses records up to here is noticed at the next start even
	// after a crash.
	if err := p.log.MarkHead(); err != nil {
		p.opts.Logger.Warn("recording the head mark", "err", err)
	}
}

func (p *Projections) writer() {
	defer close(p.stopped)
	var carry *pending // received, but not decided: a reader was waiting
	for {
		req := carry
		carry = nil
		if req == nil {
			select {
			case req = <-p.queue:
			case <-p.stop:
				p.drain()
				return
			}
		}
		p.mu.Lock()
		// Groups in flight, oldest first. Each starts its commit as soon as
		// it is decided, so its batch joins the fsync after the one under
		// way; they end in the order they started.
		var flights []*flight
		for req != nil || len(flights) > 0 {
			if req != nil {
				f := p.open()
				p.add(f, p.gather(req, maxGroup))
				p.start(f)
				flights = append(flights, f)
				req = nil
			}
			if carry == nil && flights[len(flights)-1].pipelines() && !p.broken {
				select {
				case <-flights[0].done():
				case r := <-p.queue:
					if p.readers.Load() > 0 {
						carry = r
					} else {
						req = r
					}
					continue
				}
			}
			p.finish(flights[0])
			flights = flights[1:]
		}
		if p.broken {
			p.rebuild()
			p.broken = false
		}
		p.mu.Unlock()
		p.maybeSnapshot(p.Seq())
	}
}

// gather returns first and the commands queued behind it, up to limit.
func (p *Projections) gather(first *pending, limit int) []*pending {
	group := []*pending{first}
	for len(group) < limit {
		select {
		case req := <-p.queue:
			group = append(group, req)
		default:
			return group
		}
	}
	return group
}

func (p *Projections) drain() {
	for {
		select {
		case req := <-p.queue:
			req.done <- outcome{err: eventlog.ErrClosed}
		default:
			return
		}
	}
}

// flight is one group: open while its commands are decided, then
// committing.
type flight struct {
	group  []*pending
	outs   []outcome
	tx     *eventlog.Txn    // while open; nil once started or failed
	idem   []*idemRecord    // answers recorded in the group, held until durable
	err    error            // why the group failed before its commit
	commit *eventlog.Flight // once started
	gen    uint64           // the state's authGen when the group opened
	// auth says the group changed accounts or keys: the published
	// authentication index must be rebuilt once it is durable.
	auth bool
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (f *flight) done() <-chan struct{} {
	if f.commit == nil {
		return closedChan
	}
	return f.commit.Done()
}

// pipelines says whether the next group may be decided while f syncs, or
// after it, before f is finished. Not after a commit that failed: f must
// be finished first, and the state rebuilt, before anything is decided
// against it. On one node a failed commit fails every later one in flight
// too (the log stops), but a replicated log goes on after a refused
// append, and its commit has always ended by the time Start returns: a
// group decided against one that failed there could commit, acknowledging
// what follows from changes that were never made.
func (f *flight) pipelines() bool {
	if f.commit == nil || f.auth {
		return false
	}
	select {
	case <-f.commit.Done():
		return f.commit.Wait() == nil
	default:
		return true
	}
}

// open begins a group's transaction. The caller holds the write lock.
func (p *Projections) open() *flight {
	f := &flight{gen: p.state.authGen}
	f.tx, f.err = p.log.Begin()
	return f
}

// add decides and applies cmds in f. After a command produced an event the
// state cannot apply (a bug), the group is abandoned, and p.broken set: the
// state holds changes that are not in the log, and no later group may be
// decided until it is rebuilt.
func (p *Projections) add(f *flight, cmds []*pending) {
	for _, req := range cmds {
		f.group = append(f.group, req)
		if f.tx == nil {
			f.outs = append(f.outs, outcome{err: f.err})
			continue
		}
		out, broken := p.decide(f.tx, req.cmd)
		f.outs = append(f.outs, out)
		if broken != nil {
			// Commit nothing of this group, and go back to what the log says.
			f.tx.Abort()
			f.tx, f.err = nil, fmt.Errorf("%w", broken)
			p.broken = true
			failAll(f.outs, f.err)
		}
	}
}

// start queues the expired idempotency records' deletion in f and starts
// its commit.
func (p *Projections) start(f *flight) {
	f.idem, p.idem.held = p.idem.held, nil
	if f.tx == nil {
		return
	}
	expired, err := p.sweepIdempotency(f.tx, len(f.group))
	if err != nil {
		// The group's changes are in the state but will not be in the log.
		f.tx.Abort()
		f.tx, f.err = nil, err
		p.broken = true
		failAll(f.outs, err)
		return
	}
	// Expired answers leave memory now: if the commit fails, rebuild
	// reloads what the store holds.
	p.idem.remove(expired)
	f.auth = p.state.authGen != f.gen
	f.commit = f.tx.Start()
	f.tx = nil
}

// finish waits for f's commit and answers its commands. The caller holds
// the write lock.
func (p *Projections) finish(f *flight) {
	if f.commit != nil {
		if err := f.commit.Wait(); err != nil {
			// The state now holds changes that may not be on disk: it is
			// rebuilt from the durable log once no group is in flight.
			p.broken = true
			failAll(f.outs, err)
		} else {
			dropHeldAnswers(f.idem)
			if f.auth {
				p.publishAuth()
			}
		}
	}
	for i, req := range f.group {
		req.done <- f.outs[i]
	}
}

func failAll(outs []outcome, err error) {
	for i := range outs {
		if outs[i].err == nil {
			outs[i] = outcome{err: err}
		}
	}
}

// rebuild replaces the state by a replay of the durable log, and the
// recorded answers by what the store holds.
func (p *Projections) rebuild() {
	s, err := ReplayLog(p.log, nil)
	if err != nil {
		// Never keep serving changes that may not be on disk: an empty
		// state shows nothing rather than something false.
		p.opts.Logger.Error("rebuilding the state after a failed commit", "err", err)
		s = NewState()
	}
	p.state = s
	if idem, err := loadIdempotency(p.log.Store(), p.log.IDs().Now()); err == nil {
		p.idem = idem
	}
	p.publishAuth()
}

// decide runs one command. A non-nil second result means the group must
// be abandoned: the state has taken part of an event it could not apply.
func (p *Projections) decide(tx *eventlog.Txn, cmd Command) (out outcome, broken error) {
	defer func() {
		if r := recover(); r != nil {
			broken = fmt.Errorf("command panicked: %v", r)
		}
	}()
	if cmd.Idem != nil {
		return p.idempotent(tx, cmd)
	}
	return p.run(tx, cmd)
}

// run decides, adds and applies one command's events.
func (p *Projections) run(tx *eventlog.Txn, cmd Command) (out outcome, broken error) {
	payloads, puts, err := cmd.Decide(p.state)
	if err != nil {
		return outcome{err: err}, nil
	}
	if len(payloads) > 0 || len(puts) > 0 {
		events := make([]eventlog.Event, len(payloads))
		for i, pl := range payloads {
			events[i] = eventlog.Event{Account: cmd.Account, Actor: cmd.Actor, Payload: pl}
		}
		recs, err := tx.Add(events, puts...)
		if err != nil {
			return outcome{err: err}, nil
		}
		for i := range recs {
			if err := p.state.apply(&recs[i], payloads[i]); err != nil {
				return outcome{}, fmt.Errorf("applying %s: %w", recs[i].Type, err)
			}
		}
		out.records = recs
	}
	if cmd.Result != nil {
		out.value = cmd.Result(p.state)
	}
	if cmd.ResultOf != nil {
		out.value = cmd.ResultOf(p.state, out.records)
	}
	return out, nil
}
