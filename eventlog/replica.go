package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// The backend seam. A single node keeps the log in its Pebble store and
// nothing else (Options.Replicator nil: the default, and the path every
// single-node test runs). In a cluster the log of record is a replicated
// one (a JetStream stream): each Txn is one entry of it, appended with a
// compare-and-append on the position of the last entry this node applied,
// and only then committed to the local store. Every node, the writer
// included, keeps the same records in its own store, applying the entries
// others appended with ApplyEntry, so records, seqs and hash chains are
// byte for byte the same on every node, and `log verify`, export and
// import read a node's store as they read a single node's.

// Replicator appends a node's transactions to the replicated log.
type Replicator interface {
	// Writable returns nil while this node may append (it holds the
	// writer lease and has applied every entry), else an error wrapping
	// ErrNotWriter. Begin asks it, so a node that is not the writer
	// refuses a transaction before deciding anything.
	Writable() error
	// Append durably appends entry right after the entry at position
	// after (0: the log is empty) and returns the new entry's position.
	// When the replicated log holds an entry past after, it appends
	// nothing and returns an error wrapping ErrStale. Any other error
	// leaves unknown whether the entry was appended.
	Append(entry []byte, after uint64) (uint64, error)
}

// ErrNotWriter refuses a write on a node that does not hold the writer
// lease at the moment; the write can be retried (another node takes it).
var ErrNotWriter = errors.New("this node is not the writer")

// ErrStale reports an append refused because the replicated log moved on
// past this node's last entry: another writer appended, so this node's
// view (and its lease) is stale.
var ErrStale = errors.New("the replicated log moved past this node's last entry")

// ErrUnreadable refuses a replicated entry holding a record whose payload
// this build does not decode: most often one a newer release wrote, whose
// type or version this one does not know.
var ErrUnreadable = errors.New("a record this build cannot read")

// replPosKey keeps the position in the replicated log of the last entry
// the store holds, written in the same batch as the entry's records.
var replPosKey = []byte{prefixMeta, 'r', 'e', 'p', 'l', '_', 'p', 'o', 's'}

// entry is what one Txn replicates: its records, as stored, and its
// bookkeeping writes, so that a follower's store ends up as the writer's.
// A follower applies them in this order, the order Log.WriteSync adds
// them in.
type entry struct {
	Records [][]byte `msgpack:"r"`
	Puts    [][]byte `msgpack:"p"` // key, value, key, value, …
	Deletes [][]byte `msgpack:"d"`
	Ranges  [][]byte `msgpack:"x,omitempty"` // from, to, from, to, …: range deletions
}

func (e *entry) empty() bool {
	return len(e.Records)+len(e.Puts)+len(e.Deletes)+len(e.Ranges) == 0
}

// loadReplPos reads the stored replicated-log position (0 when none).
func (s *Store) loadReplPos() (uint64, error) {
	v, ok, err := s.Get(replPosKey)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: replicated position of %d bytes", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func posValue(pos uint64) []byte { return binary.BigEndian.AppendUint64(nil, pos) }

// ReplPos returns the position in the replicated log of the last entry
// this node's store holds; 0 on a single node or before the first entry.
func (l *Log) ReplPos() uint64 { return l.replPos.Load() }

// ApplyEntry writes the entry at position pos of the replicated log,
// appended by whichever node was the writer then, to this node's store.
// An entry this store already holds (pos at or below ReplPos, such as this
// node's own appends) is skipped. Records must continue this log's seqs
// and hash chain; an entry that does not is refused with ErrCorrupt. A
// record whose payload this build cannot decode (a type or version only a
// newer release knows, during a rolling upgrade) is refused with
// ErrUnreadable. Then apply, if set, takes the records and their payloads
// (decoded and upcast as Registry.Decode does; their own copies) before
// anything is written: an error from it refuses the entry too, and is
// returned as it is. A refused entry writes nothing, so a node never
// stores a record its state could not replay. A commit that fails after
// apply took the records returns ErrUnavailable: the caller's state then
// holds what the store does not.
func (l *Log) ApplyEntry(pos uint64, data []byte, apply func(recs []Record, payloads []any) error) error {
	l.head.Lock()
	defer l.head.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.failure(); err != nil {
		return err
	}
	if pos <= l.replPos.Load() {
		return nil
	}
	var e entry
	if err := msgpack.Unmarshal(data, &e); err != nil {
		return fmt.Errorf("%w: entry %d: %v", ErrCorrupt, pos, err)
	}
	if len(e.Puts)%2 != 0 || len(e.Ranges)%2 != 0 {
		return fmt.Errorf("%w: entry %d: odd put or range list", ErrCorrupt, pos)
	}
	recs := make([]Record, len(e.Records))
	next, hash := l.next, l.lastHash
	for i, v := range e.Records {
		body, stored, err := splitValue(v)
		if err != nil {
			return fmt.Errorf("entry %d: %w", pos, err)
		}
		if err := decodeRecord(v, &recs[i], nil); err != nil {
			return fmt.Errorf("entry %d: %w", pos, err)
		}
		if recs[i].Seq != next {
			return fmt.Errorf("%w: entry %d holds seq %d where %d comes next", ErrCorrupt, pos, recs[i].Seq, next)
		}
		if chainHash(hash, body) != stored {
			return fmt.Errorf("%w: entry %d: seq %d does not continue the hash chain", ErrCorrupt, pos, next)
		}
		hash = stored
		next++
	}
	payloads := make([]any, len(recs))
	for i := range recs {
		v, err := l.opts.Registry.Decode(&recs[i])
		if err != nil {
			return fmt.Errorf("%w: entry %d: seq %d (%s v%d): %v", ErrUnreadable, pos, recs[i].Seq, recs[i].Type, recs[i].Version, err)
		}
		payloads[i] = v
	}
	b := l.db.db.NewBatch()
	defer b.Close()
	for i, v := range e.Records {
		if err := b.Set(logKey(recs[i].Seq), v, nil); err != nil {
			return err
		}
	}
	for i := 0; i < len(e.Puts); i += 2 {
		if len(e.Puts[i]) == 0 || e.Puts[i][0] == prefixLog {
			return fmt.Errorf("%w: entry %d puts into the log keyspace", ErrCorrupt, pos)
		}
		if err := b.Set(e.Puts[i], e.Puts[i+1], nil); err != nil {
			return err
		}
	}
	for _, k := range e.Deletes {
		if len(k) == 0 || k[0] == prefixLog {
			return fmt.Errorf("%w: entry %d deletes in the log keyspace", ErrCorrupt, pos)
		}
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	for i := 0; i < len(e.Ranges); i += 2 {
		if err := checkRange(e.Ranges[i], e.Ranges[i+1]); err != nil {
			return fmt.Errorf("%w: entry %d: %v", ErrCorrupt, pos, err)
		}
		if err := b.DeleteRange(e.Ranges[i], e.Ranges[i+1], nil); err != nil {
			return err
		}
	}
	if err := b.Set(replPosKey, posValue(pos), nil); err != nil {
		return err
	}
	if apply != nil && len(recs) > 0 {
		if err := apply(recs, payloads); err != nil {
			return err
		}
	}
	if err := l.db.commitSync(b); err != nil {
		err = fmt.Errorf("%w: applying entry %d: %v", ErrUnavailable, pos, err)
		l.failed.Store(&err)
		return err
	}
	l.setReplPos(pos)
	if len(recs) == 0 {
		return nil
	}
	l.durableMu.Lock()
	l.next, l.lastHash, l.lastTime = next, hash, recs[len(recs)-1].Time
	l.durableMu.Unlock()
	l.tip, l.tipNext, l.tipHash, l.tipTime = nil, next, hash, l.lastTime // a replicated log is never pipelined
	l.publish(next - 1)
	if l.opts.OnCommit != nil {
		l.opts.OnCommit(len(recs))
	}
	return nil
}

// replicate appends the transaction's entry to the replicated log; on
// success it adds the new position to the batch, so the store records
// which entry it holds in the same commit.
func (t *Txn) replicate() error {
	if t.entry.empty() {
		return nil
	}
	data, err := msgpack.Marshal(&t.entry)
	if err != nil {
		return err
	}
	pos, err := t.l.opts.Replicator.Append(data, t.l.replPos.Load())
	if err != nil {
		return err
	}
	t.pos = pos
	return t.batch.Set(replPosKey, posValue(pos), nil)
}

// WriteSync writes bookkeeping puts and deletes the keys in [delFrom,
// delTo) (none when delFrom is nil) in one durable write, as
// Store.WriteSync does. On a cluster node it is an entry of the replicated
// log, taken as a transaction is (only on the writer, else ErrNotWriter),
// so that every node's store holds it: the webhooks' delivery state, which
// a node that takes over delivering resumes from.
func (l *Log) WriteSync(puts []Put, delFrom, delTo []byte) error {
	if l.opts.Replicator == nil {
		return l.db.WriteSync(puts, delFrom, delTo)
	}
	t, err := l.Begin()
	if err != nil {
		return err
	}
	if _, err := t.add(nil, puts); err != nil {
		t.Abort()
		return err
	}
	if delFrom != nil {
		if err := t.DeleteRange(delFrom, delTo); err != nil {
			t.Abort()
			return err
		}
	}
	return t.Commit()
}

// StartWriteSync is WriteSync that returns once the write is started,
// with the wait for it to be durable (Store.StartWriteSync). On a cluster
// node the append to the replicated log is not pipelined: the write is
// durable when this returns, and wait only reports how it ended.
func (l *Log) StartWriteSync(puts []Put, delFrom, delTo []byte) (wait func() error) {
	if l.opts.Replicator == nil {
		return l.db.StartWriteSync(puts, delFrom, delTo)
	}
	err := l.WriteSync(puts, delFrom, delTo)
	return func() error { return err }
}
