package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Txn appends a group of events, possibly from many commands, that commit
// together with one fsync. While a Txn is open it owns the head of the log,
// so its records get consecutive seqs and chain hashes as soon as they are
// added; a caller can apply them to in-memory state before committing, and
// later commands of the group see their effects. Nothing added is durable
// or visible to readers until Commit (or the Wait of its Start) returns nil.
//
// Start lets the next Txn be built while this one syncs: the next one
// continues the chain from this one's last record, and its own commit
// waits for this one's and fails if this one failed. So commits reach the
// disk in the order their transactions began, and a later one is never
// durable without every earlier one.
type Txn struct {
	l     *Log
	batch *pebble.Batch
	now   time.Time
	next  uint64
	hash  [HashSize]byte
	n     int     // records and puts added
	prev  *Flight // the commit started before this Txn began, if any

	// With a Replicator, what the commit appends to the replicated log,
	// and the position it got there.
	entry entry
	pos   uint64
}

// Flight is a commit under way (see Txn.Start).
type Flight struct {
	done chan struct{}
	err  error // set before done is closed
}

// Done is closed when the commit has ended; Wait then returns at once.
func (f *Flight) Done() <-chan struct{} { return f.done }

// Wait returns when the commit has ended: nil when every record of its
// transaction, and of every transaction started before it, is durable and
// visible to readers; ErrUnavailable (or the error of the earlier commit
// that failed) otherwise.
func (f *Flight) Wait() error {
	<-f.done
	return f.err
}

// Begin opens a transaction, waiting until no other is open (a started
// one is no longer open). It returns ErrUnavailable after a storage failure
// and ErrClosed after Close. Every Txn must end with Commit, Start or Abort.
func (l *Log) Begin() (*Txn, error) {
	l.head.Lock()
	if l.closed {
		l.head.Unlock()
		return nil, ErrClosed
	}
	if err := l.failure(); err != nil {
		l.head.Unlock()
		return nil, err
	}
	if r := l.opts.Replicator; r != nil {
		if err := r.Writable(); err != nil {
			l.head.Unlock()
			return nil, err
		}
	} else if l.replPos.Load() > 0 {
		// A cluster node's copy opened on its own (a CLI command while
		// serve is down): a write here would fork it from the cluster.
		l.head.Unlock()
		return nil, fmt.Errorf("%w: %s holds a copy of a cluster's log; write through a running cluster node", ErrNotWriter, l.db.Dir())
	}
	now := l.opts.IDs.Now()
	if now.Before(l.tipTime) && l.tipTime.Sub(now) <= maxClockStepBack {
		now = l.tipTime // the clock stepped back a little: times keep their order
	}
	return &Txn{l: l, batch: l.db.db.NewBatch(), now: now, next: l.tipNext, hash: l.tipHash, prev: l.tip}, nil
}

// Now is the time every record of the transaction carries.
func (t *Txn) Now() time.Time { return t.now }

// Add assigns seqs to events and queues them, with puts, for the commit. It
// is all or nothing for this call: on error nothing of it is queued and the
// transaction can go on.
func (t *Txn) Add(events []Event, puts ...Put) ([]Record, error) {
	pending, err := t.l.encode(events)
	if err != nil {
		return nil, err
	}
	return t.add(pending, puts)
}

func (t *Txn) add(events []pendingEvent, puts []Put) ([]Record, error) {
	// Check everything before anything reaches the batch: a refused call
	// must leave no trace in it.
	for _, p := range puts {
		if len(p.Key) == 0 || p.Key[0] == prefixLog {
			return nil, fmt.Errorf("put key %q is in the log keyspace", p.Key)
		}
	}
	for i, ev := range events {
		if len(ev.payload) == 0 {
			return nil, fmt.Errorf("record %d: empty payload", t.next+uint64(i))
		}
	}
	recs := make([]Record, len(events))
	seq, hash := t.next, t.hash
	for i, ev := range events {
		recs[i] = Record{
			Seq: seq, ID: t.l.opts.IDs.New("evt_"), Type: ev.typ, Version: ev.version,
			Time: t.now, Account: ev.account, Actor: ev.actor, Payload: ev.payload,
		}
		// The batch copies the value: it is encoded into one buffer that
		// the log's open Txn reuses, not allocated per record.
		val, err := appendRecord(t.l.scratch[:0], &recs[i], hash)
		if err != nil {
			return nil, t.fail(err) // not reached: the payloads are checked above
		}
		t.l.scratch = val
		if err := t.batch.Set(logKey(seq), val, nil); err != nil {
			return nil, t.fail(err)
		}
		if t.l.opts.Replicator != nil {
			t.entry.Records = append(t.entry.Records, bytes.Clone(val))
		}
		hash = recs[i].Hash
		seq++
	}
	if cap(t.l.scratch) > maxScratch {
		t.l.scratch = nil // a rare large record is not kept for good
	}
	for _, p := range puts {
		if err := t.batch.Set(p.Key, p.Value, nil); err != nil {
			return nil, t.fail(err)
		}
		if t.l.opts.Replicator != nil {
			t.entry.Puts = append(t.entry.Puts, p.Key, p.Value)
		}
	}
	t.next, t.hash = seq, hash
	t.n += len(recs) + len(puts)
	return recs, nil
}

// maxScratch is the largest record buffer the log keeps between records.
const maxScratch = 64 << 10

// Delete queues the removal of a bookkeeping key for the commit, such as
// an expired recorded response. It refuses keys of the log's keyspace.
func (t *Txn) Delete(key []byte) error {
	if len(key) == 0 || key[0] == prefixLog {
		return fmt.Errorf("delete of %q: not a bookkeeping key", key)
	}
	if err := t.batch.Delete(key, nil); err != nil {
		return t.fail(err)
	}
	if t.l.opts.Replicator != nil {
		t.entry.Deletes = append(t.entry.Deletes, key)
	}
	t.n++
	return nil
}

// DeleteRange queues the removal of the bookkeeping keys in [from, to)
// for the commit. It refuses a range that reaches into the log's keyspace.
func (t *Txn) DeleteRange(from, to []byte) error {
	if err := checkRange(from, to); err != nil {
		return err
	}
	if err := t.batch.DeleteRange(from, to, nil); err != nil {
		return t.fail(err)
	}
	if t.l.opts.Replicator != nil {
		t.entry.Ranges = append(t.entry.Ranges, from, to)
	}
	t.n++
	return nil
}

// fail records an error that leaves the batch in an unknown state: the log
// stops accepting writes, as after a failed commit.
func (t *Txn) fail(err error) error { return t.l.fail(err) }

func (l *Log) fail(err error) error {
	err = fmt.Errorf("%w: %v", ErrUnavailable, err)
	l.failed.Store(&err)
	return err
}

// Commit writes everything added with one fsync, then makes it visible to
// readers and ends the transaction. On a storage failure it returns
// ErrUnavailable, and the log accepts no more writes: whether the batch
// reached the disk cannot be known. It is Start then Wait.
func (t *Txn) Commit() error { return t.Start().Wait() }

// Start ends the transaction and commits it in the background: the next
// Begin may return before this commit's fsync does, and continues the
// chain after this transaction's records. The Flight's Wait says how the
// commit ended; records become visible to readers only when it succeeds.
func (t *Txn) Start() *Flight {
	l := t.l
	f := &Flight{done: make(chan struct{})}
	batch, prev, n, next, hash := t.batch, t.prev, t.n, t.next, t.hash
	if batch == nil {
		f.err = errors.New("eventlog: transaction already ended")
		close(f.done)
		return f
	}
	t.batch = nil // the flight owns it now
	if l.opts.Replicator != nil {
		// The replicated log decides, and a refused append is not a
		// storage failure: the log goes on from its durable head. So a
		// replicated commit is not pipelined: it ends before the next
		// Begin, and the chain continues only after a success.
		defer l.head.Unlock()
		defer close(f.done)
		defer batch.Close()
		t.batch = batch
		f.err = t.commitReplicated()
		t.batch = nil
		if f.err == nil {
			l.tip, l.tipNext, l.tipHash = nil, next, hash
			if n > 0 {
				l.tipTime = t.now
			}
		} else {
			l.tip, l.tipNext, l.tipHash, l.tipTime = nil, l.next, l.lastHash, l.lastTime
		}
		return f
	}
	// The batch reaches Pebble's WAL now, while the head is still held, so
	// batches reach the disk in the order of their seqs, and the next
	// transaction's batch can join the fsync that follows this one's
	// without waiting for a goroutine to hand it over.
	var syncWait func() error
	var failed error
	if n > 0 {
		if failed = l.failure(); failed == nil {
			syncWait = l.db.startSync(batch)
		}
	}
	l.tip, l.tipNext, l.tipHash = f, next, hash
	now := t.now
	if n > 0 {
		l.tipTime = now
	}
	l.head.Unlock()
	go func() {
		defer close(f.done)
		defer batch.Close()
		err := failed
		if syncWait != nil {
			if err = syncWait(); err != nil {
				err = l.fail(fmt.Errorf("commit: %v", err))
			}
		}
		if prev != nil {
			// Never report this commit durable before the earlier one is,
			// nor at all after one that failed.
			if perr := prev.Wait(); perr != nil && err == nil {
				err = perr
			}
		}
		if err != nil || n == 0 {
			f.err = err
			return
		}
		l.durableMu.Lock()
		records := int(next - l.next)
		l.next, l.lastHash, l.lastTime = next, hash, now
		l.durableMu.Unlock()
		l.publish(next - 1)
		if l.opts.OnCommit != nil && records > 0 {
			l.opts.OnCommit(records)
		}
	}()
	return f
}

// commitReplicated appends the transaction to the replicated log, then
// commits it here; the caller holds the head lock, and no commit is in
// flight (none is started while a replicated one runs).
func (t *Txn) commitReplicated() error {
	l := t.l
	if t.prev != nil {
		if err := t.prev.Wait(); err != nil {
			return err
		}
	}
	if t.n == 0 {
		return nil
	}
	if err := l.failure(); err != nil {
		return err
	}
	// Nothing reaches this store, and no client hears of it, unless the
	// append was acknowledged.
	if err := t.replicate(); err != nil {
		if !errors.Is(err, ErrStale) && !errors.Is(err, ErrNotWriter) {
			err = fmt.Errorf("%w: appending to the replicated log: %v", ErrNotWriter, err)
		}
		return err
	}
	if err := l.db.commitSync(t.batch); err != nil {
		return l.fail(fmt.Errorf("commit: %v", err))
	}
	if t.pos != 0 {
		l.setReplPos(t.pos)
	}
	l.durableMu.Lock()
	records := int(t.next - l.next)
	l.next, l.lastHash = t.next, t.hash
	if records > 0 {
		l.lastTime = t.now
	}
	l.durableMu.Unlock()
	l.publish(t.next - 1)
	if l.opts.OnCommit != nil && records > 0 {
		l.opts.OnCommit(records)
	}
	return nil
}

// Abort discards everything added and ends the transaction.
func (t *Txn) Abort() { t.end() }

func (t *Txn) end() {
	if t.batch == nil {
		return
	}
	t.batch.Close()
	t.batch = nil
	t.l.head.Unlock()
}
