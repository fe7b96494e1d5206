// Package eventlog is the append-only, hash-chained event log of demosvc,
// kept in Pebble. It is the only source of truth: every other piece of state
// is derived from it.
//
// Appends from any number of goroutines are group-committed: one writer
// goroutine takes everything queued, writes it as one Pebble batch and pays
// one fsync for all of it. An append returns only once its records are
// durable. Readers never see a record whose fsync has not returned, even
// though Pebble makes a batch readable before its WAL sync completes.
package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Event is one change to append. Type, version and payload encoding come
// from the registry's entry for the payload's Go type.
type Event struct {
	Account string
	Actor   string // an API key id, or "cli"
	Payload any    // a registered payload type, or a pointer to one
}

// Put is a write to a bookkeeping keyspace that must land atomically with
// the events of the same append, such as a recorded idempotent response.
type Put struct {
	Key, Value []byte
}

// ErrClosed is returned by operations on a closed log.
var ErrClosed = errors.New("event log closed")

// ErrUnavailable wraps the storage failure that stopped the log from
// accepting writes. Once a commit has failed, the log cannot know whether
// that batch is on disk, so it refuses every later append; reads go on.
var ErrUnavailable = errors.New("event log unavailable")

// Options configures a Log.
type Options struct {
	Registry *Registry // required
	IDs      *IDs      // required: mints event ids and reads the clock
	// MaxBatch caps how many appends one commit takes. Zero means 1024.
	MaxBatch int
	// OnCommit, if set, is called by the writer after each durable commit
	// with the number of records it carried (for metrics).
	OnCommit func(records int)
}

// Log is the event log. All methods are safe for concurrent use.
type Log struct {
	db   *Store
	opts Options

	queue   chan *appendReq
	stop    chan struct{}
	stopped chan struct{}

	// durable is the highest seq whose Commit(Sync) has returned. Every
	// reader is bounded by it.
	durable atomic.Uint64
	failed  atomic.Pointer[error]

	mu      sync.Mutex
	advance chan struct{} // closed and replaced each time durable moves

	closeOnce sync.Once

	// head guards the head of the chain. An open Txn holds it.
	head     sync.Mutex
	closed   bool
	next     uint64
	lastHash [HashSize]byte
}

type appendReq struct {
	events []pendingEvent
	puts   []Put
	done   chan appendResult
}

type pendingEvent struct {
	typ     string
	version int
	account string
	actor   string
	payload []byte
}

type appendResult struct {
	records []Record
	err     error
}

// OpenLog opens the log kept in store, recovering the head of the chain,
// and starts its writer.
func OpenLog(store *Store, opts Options) (*Log, error) {
	if opts.Registry == nil || opts.IDs == nil {
		return nil, errors.New("eventlog: Options.Registry and Options.IDs are required")
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1024
	}
	l := &Log{
		db:      store,
		opts:    opts,
		queue:   make(chan *appendReq, opts.MaxBatch),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		advance: make(chan struct{}),
	}
	head, err := l.readHead()
	if err != nil {
		return nil, err
	}
	l.next = head.Seq + 1
	l.lastHash = head.Hash
	l.durable.Store(head.Seq)
	go l.writer()
	return l, nil
}

// readHead returns the last record, or a zero record for an empty log.
func (l *Log) readHead() (Record, error) {
	it, err := l.db.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
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
	if err := decodeRecord(it.Value(), &head); err != nil {
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

// Append appends events atomically, with puts in the same batch, and
// returns their records once they are durable. The events of one call get
// consecutive seqs. It returns ErrUnavailable after a storage failure and
// ErrClosed after Close; a cancelled ctx abandons the wait, not the write.
func (l *Log) Append(ctx context.Context, events []Event, puts ...Put) ([]Record, error) {
	pending, err := l.encode(events)
	if err != nil {
		return nil, err
	}
	req := &appendReq{events: pending, puts: puts, done: make(chan appendResult, 1)}
	if err := l.failure(); err != nil {
		return nil, err
	}
	select {
	case <-l.stop:
		return nil, ErrClosed
	default:
	}
	select {
	case l.queue <- req:
	case <-l.stop:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case res := <-req.done:
		return res.records, res.err
	case <-l.stopped:
		// The writer answers everything it took; a request queued after
		// it stopped gets no answer.
		select {
		case res := <-req.done:
			return res.records, res.err
		default:
			return nil, ErrClosed
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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

// writer is the single goroutine that assigns seqs, extends the chain and
// writes each group of queued appends as one batch. It does not wait for
// the batch's fsync: it hands the batch to the syncer and builds the next
// group while the disk syncs, so CPU work and fsync overlap. That, and
// every append queued meanwhile sharing the next fsync, is the group
// commit.
func (l *Log) writer() {
	syncq := make(chan *inflight, 8)
	syncerDone := make(chan struct{})
	go l.syncer(syncq, syncerDone)
	defer func() {
		close(syncq)
		<-syncerDone
		close(l.stopped)
	}()
	group := make([]*appendReq, 0, l.opts.MaxBatch)
	for {
		select {
		case req := <-l.queue:
			group = append(group[:0], req)
		case <-l.stop:
			l.drainClosed()
			return
		}
	gather:
		for len(group) < l.opts.MaxBatch {
			select {
			case req := <-l.queue:
				group = append(group, req)
			default:
				break gather
			}
		}
		if f := l.applyGroup(group); f != nil {
			syncq <- f
		}
	}
}

// inflight is a group applied to Pebble whose fsync has not returned.
type inflight struct {
	batch   *pebble.Batch
	last    uint64
	records int
	group   []*appendReq
	results []appendResult
}

// applyGroup writes a group without waiting for its fsync. It answers the
// group itself when nothing needs syncing or it failed.
func (l *Log) applyGroup(group []*appendReq) *inflight {
	f := &inflight{group: append([]*appendReq(nil), group...), results: make([]appendResult, len(group))}
	tx, err := l.Begin()
	if err == nil {
		for i, req := range group {
			f.results[i].records, f.results[i].err = tx.add(req.events, req.puts)
		}
		f.batch, f.last, f.records, err = tx.apply()
	}
	if err != nil || f.batch == nil {
		f.answer(err)
		return nil
	}
	return f
}

// syncer waits for each applied group's fsync in order, then makes it
// visible and answers its appends.
func (l *Log) syncer(syncq <-chan *inflight, done chan<- struct{}) {
	defer close(done)
	for f := range syncq {
		err := f.batch.SyncWait()
		f.batch.Close()
		if err != nil {
			err = fmt.Errorf("%w: sync: %v", ErrUnavailable, err)
			l.failed.Store(&err)
		} else if ferr := l.failure(); ferr != nil {
			// An earlier group's sync failed: this one's fate is unknown.
			err = ferr
		} else {
			l.publish(f.last)
			if l.opts.OnCommit != nil {
				l.opts.OnCommit(f.records)
			}
		}
		f.answer(err)
	}
}

func (f *inflight) answer(err error) {
	for i, req := range f.group {
		if err != nil && f.results[i].err == nil {
			f.results[i] = appendResult{err: err}
		}
		req.done <- f.results[i]
	}
}

func (l *Log) drainClosed() {
	for {
		select {
		case req := <-l.queue:
			req.done <- appendResult{err: ErrClosed}
		default:
			return
		}
	}
}

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
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.stop:
			return ErrClosed
		}
	}
}

// Read calls fn for every durable record with from <= seq <= to, in order.
// to == 0 means up to the durable head. fn must not keep rec's Payload past
// its return; Read reuses nothing else. An error from fn stops the read and
// is returned.
func (l *Log) Read(from, to uint64, fn func(rec *Record) error) error {
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
	expect := from
	for valid := it.First(); valid; valid = it.Next() {
		if err := decodeRecord(it.Value(), &rec); err != nil {
			return fmt.Errorf("seq %d: %w", expect, err)
		}
		if rec.Seq != expect {
			return fmt.Errorf("%w: expected seq %d, found %d", ErrCorrupt, expect, rec.Seq)
		}
		if err := fn(&rec); err != nil {
			return err
		}
		expect++
	}
	if err := it.Error(); err != nil {
		return err
	}
	if expect != to+1 {
		return fmt.Errorf("%w: log ends at seq %d, durable head is %d", ErrCorrupt, expect-1, to)
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

// VerifyError names the first record that breaks the chain.
type VerifyError struct {
	Seq    uint64
	Reason string
}

func (e *VerifyError) Error() string { return fmt.Sprintf("seq %d: %s", e.Seq, e.Reason) }

// Verify recomputes the hash chain over the whole durable log. It returns
// the number of records checked, or a *VerifyError naming the first bad seq.
func (l *Log) Verify() (uint64, error) {
	it, err := l.db.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: logKey(l.DurableSeq() + 1)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var prev [HashSize]byte
	var rec Record
	expect := uint64(1)
	for valid := it.First(); valid; valid = it.Next() {
		seq, ok := seqFromKey(it.Key())
		if !ok {
			return expect - 1, &VerifyError{Seq: expect, Reason: fmt.Sprintf("malformed key %x", it.Key())}
		}
		if seq != expect {
			return expect - 1, &VerifyError{Seq: expect, Reason: fmt.Sprintf("missing; next stored seq is %d", seq)}
		}
		if err := decodeRecord(it.Value(), &rec); err != nil {
			return expect - 1, &VerifyError{Seq: seq, Reason: err.Error()}
		}
		if rec.Seq != seq {
			return expect - 1, &VerifyError{Seq: seq, Reason: fmt.Sprintf("record says seq %d", rec.Seq)}
		}
		body, stored, _ := splitValue(it.Value())
		if chainHash(prev, body) != stored {
			return expect - 1, &VerifyError{Seq: seq, Reason: "hash does not match the record and the previous hash"}
		}
		if _, err := l.opts.Registry.DecodeStored(&rec); err != nil {
			return expect - 1, &VerifyError{Seq: seq, Reason: err.Error()}
		}
		prev = stored
		expect++
	}
	if err := it.Error(); err != nil {
		return expect - 1, err
	}
	return expect - 1, nil
}

// Close stops the writer after the commit in flight and fails queued
// appends with ErrClosed. It does not close the store.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		close(l.stop)
		<-l.stopped
		l.head.Lock()
		l.closed = true
		l.head.Unlock()
	})
	return nil
}
