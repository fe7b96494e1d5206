package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/btree"
	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
)

// IdempotencyWindow is how long a recorded answer is replayed. After it a
// record is removed, from memory and from the store.
const IdempotencyWindow = 24 * time.Hour

// MaxIdempotencyKey is the longest Idempotency-Key accepted.
const MaxIdempotencyKey = 255

// Idempotency asks the writer to record a command's first answer under Key
// and to replay it for a retry carrying the same key.
type Idempotency struct {
	Key string
	// Fingerprint identifies the request: a retry with the same key and
	// another fingerprint is refused.
	Fingerprint string
	// Record renders the command's outcome, a result or an *Error, as the
	// bytes to keep and to replay. It is called on the writer, and must not
	// keep value (a session's answer goes back to its pool after). The
	// bytes are the caller's: the domain stores them and gives them back,
	// and never reads them.
	Record func(value any, err error) []byte
	// Now is when the request arrived, for the 24 h window.
	Now time.Time
}

// Replay is the answer to a command run under an Idempotency: the bytes
// Record made of the first outcome under its key, for the first request
// and every retry alike.
type Replay struct {
	Response []byte
}

// idemRecord is a recorded answer as the store keeps it. One without a
// Response (the layout before it) is not loaded: it only loses its replay.
// In memory a record holds its Response only until its commit is durable:
// after that a replay reads it from the store (storedResponse), so that
// the answers of a day's window live on disk, not in the heap.
type idemRecord struct {
	Fingerprint string `msgpack:"f"`
	Response    []byte `msgpack:"r"`
	Created     int64  `msgpack:"c"` // unix seconds
	// Account and Key name the record: its store key is made of them and
	// of Created, so one record has exactly one key.
	Account string `msgpack:"a"`
	Key     string `msgpack:"k"`
}

// The store keeps records under idemTimePrefix + Created (8 bytes, big
// endian) + account + 0 + key: ordered by age, so start-up reads only the
// window's records and every expired one sorts before a single bound.
// Keys of the layout before (idemKey's prefix followed directly by the
// account) are moved at start-up; account ids never begin with byte 1.
var idemTimePrefix = []byte{eventlog.KeyspaceIdempotency, 1}

func idemTimeBound(created int64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), idemTimePrefix...), uint64(max(created, 0)))
}

func (r *idemRecord) storeKey() []byte {
	k := idemTimeBound(r.Created)
	k = append(k, r.Account...)
	k = append(k, 0)
	return append(k, r.Key...)
}

func (r *idemRecord) expired(now time.Time) bool {
	return now.Sub(time.Unix(r.Created, 0)) >= IdempotencyWindow
}

// idemKey names a record in memory.
func idemKey(account, key string) string { return account + "\x00" + key }

// idemSweepMin is how many expired records a commit removes at least when
// there are that many: with the group's size added, removal outpaces
// recording, so the backlog after a pause drains in bounded steps.
const idemSweepMin = 64

// idemIndex holds the recorded answers inside the window, by name for
// replays and by age for expiry. It is owned by the writer.
type idemIndex struct {
	byKey map[string]*idemRecord
	byAge *btree.BTreeG[*idemRecord]
	// held are the records recorded since the last group started its
	// commit, which hold their Response until that commit is durable.
	held []*idemRecord
}

func newIdemIndex() *idemIndex {
	return &idemIndex{byKey: map[string]*idemRecord{}, byAge: btree.NewG(32, func(a, b *idemRecord) bool {
		if a.Created != b.Created {
			return a.Created < b.Created
		}
		if a.Account != b.Account {
			return a.Account < b.Account
		}
		return a.Key < b.Key
	})}
}

// put records r and returns the record it replaces, if any.
func (x *idemIndex) put(r *idemRecord) (old *idemRecord) {
	k := idemKey(r.Account, r.Key)
	if old = x.byKey[k]; old != nil {
		x.byAge.Delete(old)
	}
	x.byKey[k] = r
	x.byAge.ReplaceOrInsert(r)
	return old
}

// oldestExpired returns up to n records expired at now, oldest first,
// without removing them.
func (x *idemIndex) oldestExpired(now time.Time, n int) []*idemRecord {
	var out []*idemRecord
	x.byAge.Ascend(func(r *idemRecord) bool {
		if len(out) >= n || !r.expired(now) {
			return false
		}
		out = append(out, r)
		return true
	})
	return out
}

// remove drops rs, unless a newer record has taken a name's place.
func (x *idemIndex) remove(rs []*idemRecord) {
	for _, r := range rs {
		x.byAge.Delete(r)
		if k := idemKey(r.Account, r.Key); x.byKey[k] == r {
			delete(x.byKey, k)
		}
	}
}

// Len is how many records are held.
func (x *idemIndex) Len() int { return len(x.byKey) }

// loadIdempotency reads the recorded answers still inside the window at
// now, reading none of the expired ones, and removes from the store the
// expired ones with one range deletion.
func loadIdempotency(store *eventlog.Store, now time.Time) (*idemIndex, error) {
	if err := migrateIdempotency(store); err != nil {
		return nil, err
	}
	x := newIdemIndex()
	cutoff := idemTimeBound(now.Add(-IdempotencyWindow).Unix() + 1)
	err := store.ScanFrom(idemTimePrefix, cutoff, func(k, v []byte) error {
		var r idemRecord
		if err := msgpack.Unmarshal(v, &r); err != nil || r.Response == nil || !bytes.Equal(r.storeKey(), k) {
			return nil // a damaged bookkeeping entry only loses a replay
		}
		if !r.expired(now) {
			r.Response = nil // read from the store when replayed
			x.put(&r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var stale bool
	if err := store.ScanReverse(idemTimePrefix, cutoff, func(k, v []byte) bool { stale = true; return false }); err != nil {
		return nil, err
	}
	if stale {
		if err := store.WriteSync(nil, idemTimePrefix, cutoff); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// migrateIdempotency moves records of the layout before, keyed by
// account and key alone, to the time-ordered layout.
func migrateIdempotency(store *eventlog.Store) error {
	legacy := []byte{eventlog.KeyspaceIdempotency, 2}
	end := []byte{eventlog.KeyspaceIdempotency + 1}
	var puts []eventlog.Put
	err := store.ScanFrom([]byte{eventlog.KeyspaceIdempotency}, legacy, func(k, v []byte) error {
		var r idemRecord
		account, key, ok := bytes.Cut(k[1:], []byte{0})
		if !ok || msgpack.Unmarshal(v, &r) != nil || r.Response == nil {
			return nil
		}
		r.Account, r.Key = string(account), string(key)
		b, err := msgpack.Marshal(&r)
		if err != nil {
			return err
		}
		puts = append(puts, eventlog.Put{Key: r.storeKey(), Value: b})
		return nil
	})
	if err != nil {
		return err
	}
	if len(puts) == 0 {
		return nil
	}
	return store.WriteSync(puts, legacy, end)
}

// sweepIdempotency queues in tx the deletion of the oldest records expired
// at the transaction's time, at most idemSweepMin + groupSize of them, and
// returns them to drop from memory once the commit is durable.
func (p *Projections) sweepIdempotency(tx *eventlog.Txn, groupSize int) ([]*idemRecord, error) {
	expired := p.idem.oldestExpired(tx.Now(), idemSweepMin+groupSize)
	for _, r := range expired {
		if err := tx.Delete(r.storeKey()); err != nil {
			return nil, err
		}
	}
	return expired, nil
}

// idempotent runs cmd under its Idempotency-Key: a recorded answer is
// replayed, a new one recorded in the same transaction as the events.
func (p *Projections) idempotent(tx *eventlog.Txn, cmd Command) (outcome, error) {
	id := cmd.Idem
	if r := p.idem.byKey[idemKey(cmd.Account, id.Key)]; r != nil && !r.expired(id.Now) {
		if r.Fingerprint != id.Fingerprint {
			return outcome{err: ParamErrorf(EIdempotencyConflict, "Idempotency-Key",
				"this Idempotency-Key was used with a different request in the last 24 hours")}, nil
		}
		resp, err := p.storedResponse(r)
		if err != nil {
			return outcome{err: err}, nil
		}
		return outcome{value: Replay{Response: resp}}, nil
	}
	out, broken := p.run(tx, cmd)
	if broken != nil {
		return out, broken
	}
	var domain *Error
	if out.err != nil && !errors.As(out.err, &domain) {
		return out, nil // storage trouble is not an answer to keep
	}
	r := &idemRecord{Fingerprint: id.Fingerprint, Response: id.Record(out.value, out.err), Created: id.Now.Unix(),
		Account: cmd.Account, Key: id.Key}
	ReleaseAnswer(out.value) // Record has rendered it; the caller gets the Replay
	// The command's events are in the transaction already: failing to
	// record its answer must abandon the group, not commit them.
	var buf bytes.Buffer
	if err := msgpack.NewEncoder(&buf).Encode(r); err != nil {
		return outcome{}, err
	}
	if _, err := tx.Add(nil, eventlog.Put{Key: r.storeKey(), Value: buf.Bytes()}); err != nil {
		return outcome{}, err
	}
	p.idem.held = append(p.idem.held, r)
	if old := p.idem.put(r); old != nil && !bytes.Equal(old.storeKey(), r.storeKey()) {
		// The expired answer this one replaces would otherwise stay on
		// disk under its own time.
		if err := tx.Delete(old.storeKey()); err != nil {
			return outcome{}, err
		}
	}
	return outcome{value: Replay{Response: r.Response}, records: out.records}, nil
}

// storedResponse returns r's recorded answer: the one it holds until its
// commit is durable, or the store's copy. A record the store has lost
// (damage; its removal is always the writer's, with the record's) is an
// error: running the command again could make what the first request made.
func (p *Projections) storedResponse(r *idemRecord) ([]byte, error) {
	if r.Response != nil {
		return r.Response, nil
	}
	v, ok, err := p.log.Store().Get(r.storeKey())
	if err != nil {
		return nil, fmt.Errorf("reading the answer recorded for Idempotency-Key %q: %w", r.Key, err)
	}
	var stored idemRecord
	if !ok || msgpack.Unmarshal(v, &stored) != nil || stored.Response == nil || stored.Fingerprint != r.Fingerprint {
		return nil, fmt.Errorf("the answer recorded for Idempotency-Key %q is missing from the store", r.Key)
	}
	return stored.Response, nil
}

// dropHeldAnswers lets the records of a group whose commit is durable drop their
// Response: a replay reads it from the store from now on.
func dropHeldAnswers(rs []*idemRecord) {
	for _, r := range rs {
		r.Response = nil
	}
}
