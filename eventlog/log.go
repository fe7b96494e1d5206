// Package eventlog is the append-only, hash-chained event log of demosvc,
// kept in Pebble. It is the only source of truth: every other piece of state
// is derived from it.
//
// Records are written through a Txn: Begin takes the head of the chain, Add
// gives events consecutive seqs and chain hashes, and Commit writes them all
// with one fsync. The projections writer is the one caller in the binary; it
// puts every command queued at that moment into one Txn, which is the group
// commit. Readers never see a record whose fsync has not returned, even
// though Pebble makes a batch readable before its WAL sync completes.
package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Event is one change to append. Type, version and payload encoding come
// from the registry's entry for the payload's Go type.
type Event struct {
	Account string
	Actor   string // an API key id, a user id, or "cli"
	Payload any    // a registered payload type, or a pointer to one
}

// Put is a write to a bookkeeping keyspace that must land atomically with
// the events of the same transaction, such as a recorded idempotent response.
type Put struct {
	Key, Value []byte
}

// ErrClosed is returned by operations on a closed log.
var ErrClosed = errors.New("event log closed")

// ErrUnavailable wraps the storage failure that stopped the log from
// accepting writes. Once a commit has failed, the log cannot know whether
// that batch is on disk, so it refuses every later transaction; reads go on.
var ErrUnavailable = errors.New("event log unavailable")

// Options configures a Log.
type Options struct {
	Registry *Registry // required
	IDs      *IDs      // required: mints event ids and reads the clock
	// OnCommit, if set, is called after each durable commit with the
	// number of records it carried (for metrics).
	OnCommit func(records int)
	// Replicator, if set, makes this log a replica of a replicated log
	// (replica.go): every Txn is appended there before it commits here.
	// Nil, the default, is the single node.
	Replicator Replicator
}

// Log is the event log. All methods are safe for concurrent use.
type Log struct {
	db   *Store
	opts Options

	// durable is the highest seq whose Commit(Sync) has returned. Every
	// reader is bounded by it.
	durable atomic.Uint64
	failed  atomic.Pointer[error]
	// replPos is the replicated log's position of the last entry the
	// store holds (replica.go); it moves under head (setReplPos).
	// posMoved is closed the next time it moves, while posWaiting says
	// someone waits (WaitForPos): an entry that holds no record moves it
	// and not the durable seq.
	replPos    atomic.Uint64
	posMu      sync.Mutex
	posMoved   chan struct{}
	posWaiting atomic.Bool

	mu      sync.Mutex
	advance chan struct{} // closed and replaced each time durable moves

	closing   chan struct{} // closed by Close: waiters stop waiting
	closeOnce sync.Once

	// head guards the tip of the chain: where the next Txn continues,
	// which may be past the durable head while a started commit syncs. An
	// open Txn holds it.
	head    sync.Mutex
	closed  bool
	tip     *Flight // the last commit started, nil before the first
	tipNext uint64
	tipHash [HashSize]byte
	// tipTime is the time of the tip's last record: a transaction's time
	// is not earlier by up to maxClockStepBack, so record times do not go
	// back in seq order when the clock steps back a little (or a cluster's
	// next writer's clock is a little behind), which the searches by time
	// (the dashboard's, the audit log's) rely on.
	tipTime time.Time
	scratch []byte // where the open Txn encodes a record for its batch

	// durableMu guards the durable head of the chain: the record after the
	// last durable one, and that one's hash.
	durableMu sync.Mutex
	next      uint64
	lastHash  [HashSize]byte
	lastTime  time.Time
}

// maxClockStepBack is the most a transaction's time is moved forward to
// its predecessor's. A clock that was far ahead (a wrong clock corrected)
// must not carry every later record into its future: the state compares
// record times with expiries taken from the clock (dashboard sessions,
// setup links), so a record time a day ahead would expire them all.
const maxClockStepBack = time.Minute

// OpenLog opens the log kept in store, recovering the head of the chain.
func OpenLog(store *Store, opts Options) (*Log, error) {
	if opts.Registry == nil || opts.IDs == nil {
		return nil, errors.New("eventlog: Options.Registry and Options.IDs are required")
	}
	l := &Log{
		db:      store,
		opts:    opts,
		advance: make(chan struct{}),
		closing: make(chan struct{}),
	}
	if staged, err := store.importing(); err != nil {
		return nil, err
	} else if staged {
		return nil, fmt.Errorf("%w: run `demosvc log import` on %s again, which starts over, or remove it", ErrIncompleteImport, store.Dir())
	}
	head, err := store.readHead()
	if err != nil {
		if d := store.Damage(); d != nil {
			return nil, fmt.Errorf("%w: %w", ErrDamaged, &VerifyError{Seq: max(d.FromSeq, 1),
				Reason: fmt.Sprintf("reading the head of the log: %v; restore the data dir from a backup", d)})
		}
		return nil, err
	}
	l.next = head.Seq + 1
	l.lastHash, l.lastTime = head.Hash, head.Time
	l.tipNext, l.tipHash, l.tipTime = l.next, l.lastHash, l.lastTime
	l.durable.Store(head.Seq)
	pos, err := store.loadReplPos()
	if err != nil {
		return nil, err
	}
	l.replPos.Store(pos)
	if err := l.checkHeadMark(head); err != nil {
		return nil, err
	}
	return l, nil
}

// readHead returns the last record, or a zero record for an empty log.
func (s *Store) readHead() (Record, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
	if err != nil {
		return Record{}, err
	}
	defer it.Close()
	var head Record
	if !it.Last() {
		return head, it.Error()
	}
	seq, ok := seqFromKey(it.Key())
	if !ok {
		return head, fmt.Errorf("%w: unexpected key %x in the log keyspace", ErrCorrupt, it.Key())
	}
	if err := decodeRecord(it.Value(), &head, nil); err != nil {
		return head, fmt.Errorf("seq %d: %w", seq, err)
	}
	if head.Seq != seq {
		return head, fmt.Errorf("%w: key seq %d holds record seq %d", ErrCorrupt, seq, head.Seq)
	}
	return head, nil
}

// Registry returns the payload registry the log was opened with.
func (l *Log) Registry() *Registry { return l.opts.Registry }

// Store returns the store the log is kept in.
func (l *Log) Store() *Store { return l.db }

// IDs returns the log's id source and clock.
func (l *Log) IDs() *IDs { return l.opts.IDs }

// pendingEvent is an event whose payload is encoded, waiting for its seq.
type pendingEvent struct {
	typ     string
	version int
	account string
	actor   string
	payload []byte
}

// encode encodes the payloads of events, outside any lock.
func (l *Log) encode(events []Event) ([]pendingEvent, error) {
	out := make([]pendingEvent, len(events))
	for i, ev := range events {
		name, version, data, err := l.opts.Registry.Encode(ev.Payload)
		if err != nil {
			return nil, err
		}
		out[i] = pendingEvent{typ: name, version: version, account: ev.Account, actor: ev.Actor, payload: data}
	}
	return out, nil
}

func (l *Log) failure() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Unavailable returns the storage failure that stopped the log from taking
// writes (it wraps ErrUnavailable), or nil while it takes them. Once set it
// stays set: only a restart, which recovers what is on disk, clears it.
func (l *Log) Unavailable() error { return l.failure() }

// publish makes every seq up to seq visible to readers and wakes waiters.
// The durable head only moves forward: a later batch's sync implies the
// earlier ones', so publishing out of order never shows an unsynced seq.
func (l *Log) publish(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq <= l.durable.Load() {
		return
	}
	l.durable.Store(seq)
	close(l.advance)
	l.advance = make(chan struct{})
}

// DurableSeq returns the highest seq known to be durable: no reader is ever
// shown a seq above it.
func (l *Log) DurableSeq() uint64 { return l.durable.Load() }

// Changed returns a channel that is closed the next time the durable head
// moves, for loops that wait on the log among other things.
func (l *Log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.advance
}

// WaitFor blocks until DurableSeq() >= seq, ctx is done, or the log closes.
func (l *Log) WaitFor(ctx context.Context, seq uint64) error {
	for {
		l.mu.Lock()
		ch := l.advance
		l.mu.Unlock()
		if l.durable.Load() >= seq {
			return nil
		}
		if err := l.await(ctx, ch); err != nil {
			return err
		}
	}
}

// WaitForPos blocks until ReplPos() >= pos, ctx is done, or the log
// closes. On a cluster's node it waits for an entry that holds no record
// (delivery state only), which WaitFor cannot tell.
func (l *Log) WaitForPos(ctx context.Context, pos uint64) error {
	for {
		l.posMu.Lock()
		if l.posMoved == nil {
			l.posMoved = make(chan struct{})
		}
		ch := l.posMoved
		l.posWaiting.Store(true)
		l.posMu.Unlock()
		// After posWaiting is set: a position stored before it is seen
		// here, one stored after closes ch.
		if l.replPos.Load() >= pos {
			return nil
		}
		if err := l.await(ctx, ch); err != nil {
			return err
		}
	}
}

// await waits until ch is closed, ctx is done, or the log closes.
func (l *Log) await(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.closing:
		return ErrClosed
	}
}

// setReplPos moves the replicated log's position, waking WaitForPos's
// callers; it costs an atomic load when nobody waits.
func (l *Log) setReplPos(pos uint64) {
	l.replPos.Store(pos)
	if !l.posWaiting.Load() {
		return
	}
	l.posMu.Lock()
	if l.posMoved != nil {
		close(l.posMoved)
		l.posMoved = nil
	}
	l.posWaiting.Store(false)
	l.posMu.Unlock()
}

// Read calls fn for every durable record with from <= seq <= to, in order.
// to == 0 means up to the durable head. fn must not keep rec's Payload past
// its return; Read reuses nothing else. An error from fn stops the read and
// is returned.
func (l *Log) Read(from, to uint64, fn func(rec *Record) error) error {
	return l.read(from, to, func(rec *Record, _ []byte) error { return fn(rec) })
}

// read is Read, passing fn each record's stored value too.
func (l *Log) read(from, to uint64, fn func(rec *Record, value []byte) error) error {
	head := l.DurableSeq()
	if to == 0 || to > head {
		to = head
	}
	if from == 0 {
		from = 1
	}
	if from > to {
		return nil
	}
	it, err := l.db.db.NewIter(&pebble.IterOptions{LowerBound: logKey(from), UpperBound: logKey(to + 1)})
	if err != nil {
		return err
	}
	defer it.Close()
	var rec Record
	in := interned{}
	expect := from
	for valid := it.First(); valid; valid = it.Next() {
		v := it.Value()
		if err := decode(v, expect, &rec, in); err != nil {
			return err
		}
		if err := fn(&rec, v); err != nil {
			return err
		}
		expect++
	}
	if err := it.Error(); err != nil {
		return l.readError(err)
	}
	if expect != to+1 {
		return fmt.Errorf("%w: log ends at seq %d, durable head is %d", ErrCorrupt, expect-1, to)
	}
	return nil
}

// readError is a failed read of the log as a reader should see it: damage
// Pebble found is ErrDamaged naming the file and the seqs it holds, not
// Pebble's own error (which carries a "<corruption detail carrier>").
func (l *Log) readError(err error) error {
	if pebble.ExtractDataCorruptionInfo(err) == nil {
		return err
	}
	if d := l.db.Damage(); d != nil {
		return fmt.Errorf("%w: %w; `demosvc log verify` names the first bad record; restore the data dir from a backup", ErrDamaged, d)
	}
	return fmt.Errorf("%w: %v", ErrDamaged, pebble.ExtractDataCorruptionInfo(err).Details)
}

// ReadSeqs calls fn for the record of each seq of seqs, which must be
// increasing and durable, with one iterator: a reader that wants some
// records of a range (one account's) seeks past the others, and steps to
// the next record when it wants that one (a seek cost 1.2 µs a record,
// most of what reading a delivery's event cost).
func (l *Log) ReadSeqs(seqs []uint64, fn func(rec *Record) error) error {
	if len(seqs) == 0 {
		return nil
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			return fmt.Errorf("read of seqs: %d after %d", seqs[i], seqs[i-1])
		}
	}
	if last := seqs[len(seqs)-1]; last > l.DurableSeq() {
		return fmt.Errorf("read of seq %d: the durable head is %d", last, l.DurableSeq())
	}
	it, err := l.db.db.NewIter(&pebble.IterOptions{LowerBound: logKey(seqs[0]), UpperBound: logKey(seqs[len(seqs)-1] + 1)})
	if err != nil {
		return err
	}
	defer it.Close()
	var rec Record
	in := interned{}
	for i, seq := range seqs {
		var found bool
		if i > 0 && seq == seqs[i-1]+1 {
			found = it.Next() // pass finds it another seq if this one is missing
		} else {
			found = it.SeekGE(logKey(seq))
		}
		if !found {
			if err := it.Error(); err != nil {
				return l.readError(err)
			}
			return fmt.Errorf("%w: seq %d is missing below the durable head", ErrCorrupt, seq)
		}
		if err := pass(it.Value(), seq, &rec, in, fn); err != nil {
			return err
		}
	}
	return it.Error()
}

// pass decodes value, which must be seq's record, into rec and calls fn
// with it.
func pass(value []byte, seq uint64, rec *Record, in interned, fn func(rec *Record) error) error {
	if err := decode(value, seq, rec, in); err != nil {
		return err
	}
	return fn(rec)
}

// decode decodes the stored value of seq into rec.
func decode(value []byte, seq uint64, rec *Record, in interned) error {
	if err := decodeRecord(value, rec, in); err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	if rec.Seq != seq {
		return fmt.Errorf("%w: expected seq %d, found %d", ErrCorrupt, seq, rec.Seq)
	}
	return nil
}

// Follow calls fn for every durable record from seq from on, waiting for new
// ones, until ctx is done (it then returns ctx.Err()), fn fails or the log
// closes.
func (l *Log) Follow(ctx context.Context, from uint64, fn func(rec *Record) error) error {
	if from == 0 {
		from = 1
	}
	for {
		head := l.DurableSeq()
		if head >= from {
			if err := l.Read(from, head, fn); err != nil {
				return err
			}
			from = head + 1
		}
		if err := l.WaitFor(ctx, from); err != nil {
			return err
		}
	}
}

// Close waits for the transaction in flight, then refuses new ones with
// ErrClosed, wakes every waiter and records the head in the head mark. It
// does not close the store.
func (l *Log) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.head.Lock()
		l.closed = true
		tip := l.tip
		l.head.Unlock()
		if tip != nil {
			tip.Wait() // its outcome is the failure checked below
		}
		close(l.closing)
		if l.failure() == nil {
			err = l.MarkHead()
		}
	})
	return err
}
