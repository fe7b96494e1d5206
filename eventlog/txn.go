package eventlog

import (
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
// or visible to readers until Commit returns nil.
type Txn struct {
	l     *Log
	batch *pebble.Batch
	now   time.Time
	next  uint64
	hash  [HashSize]byte
	n     int // records and puts added

	// With a Replicator, what the commit appends to the replicated log,
	// and the position it got there.
	entry entry
	pos   uint64
}

// Begin opens a transaction, waiting until no other is open. It returns
// ErrUnavailable after a storage failure and ErrClosed after Close. Every
// Txn must end with Commit or Abort.
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
	return &Txn{l: l, batch: l.db.db.NewBatch(), now: l.opts.IDs.Now(), next: l.next, hash: l.lastHash}, nil
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
	recs := make([]Record, len(events))
	vals := make([][]byte, len(events))
	seq, hash := t.next, t.hash
	for i, ev := range events {
		recs[i] = Record{
			Seq: seq, ID: t.l.opts.IDs.New("evt_"), Type: ev.typ, Version: ev.version,
			Time: t.now, Account: ev.account, Actor: ev.actor, Payload: ev.payload,
		}
		val, err := encodeRecord(&recs[i], hash)
		if err != nil {
			return nil, err
		}
		vals[i] = val
		hash = recs[i].Hash
		seq++
	}
	for i := range recs {
		if err := t.batch.Set(logKey(recs[i].Seq), vals[i], nil); err != nil {
			return nil, t.fail(err)
		}
	}
	for _, p := range puts {
		if err := t.batch.Set(p.Key, p.Value, nil); err != nil {
			return nil, t.fail(err)
		}
	}
	if t.l.opts.Replicator != nil {
		t.entry.Records = append(t.entry.Records, vals...)
		for _, p := range puts {
			t.entry.Puts = append(t.entry.Puts, p.Key, p.Value)
		}
	}
	t.next, t.hash = seq, hash
	t.n += len(recs) + len(puts)
	return recs, nil
}

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

// fail records an error that leaves the batch in an unknown state: the log
// stops accepting writes, as after a failed commit.
func (t *Txn) fail(err error) error {
	err = fmt.Errorf("%w: %v", ErrUnavailable, err)
	t.l.failed.Store(&err)
	return err
}

// Commit writes everything added with one fsync, then makes it visible to
// readers and ends the transaction. On a storage failure it returns
// ErrUnavailable, and the log accepts no more writes: whether the batch
// reached the disk cannot be known.
func (t *Txn) Commit() error {
	l := t.l
	defer t.end()
	if t.n == 0 {
		return nil
	}
	if err := l.failure(); err != nil {
		return err
	}
	if l.opts.Replicator != nil {
		// The replicated log decides: nothing reaches this store, and
		// no client hears of it, unless the append was acknowledged.
		// A refused append is not a storage failure: the log goes on.
		if err := t.replicate(); err != nil {
			if !errors.Is(err, ErrStale) && !errors.Is(err, ErrNotWriter) {
				err = fmt.Errorf("%w: appending to the replicated log: %v", ErrNotWriter, err)
			}
			return err
		}
	}
	if err := l.db.commitSync(t.batch); err != nil {
		return t.fail(fmt.Errorf("commit: %v", err))
	}
	if t.pos != 0 {
		l.replPos.Store(t.pos)
	}
	records := int(t.next - l.next)
	l.next, l.lastHash = t.next, t.hash
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
