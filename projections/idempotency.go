package projections

import (
	"bytes"
	"errors"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
)

// IdempotencyWindow is how long a recorded answer is replayed.
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
	// bytes to keep and to replay. It is called on the writer. The bytes
	// are the caller's: the domain stores them and gives them back, and
	// never reads them.
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
type idemRecord struct {
	Fingerprint string `msgpack:"f"`
	Response    []byte `msgpack:"r"`
	Created     int64  `msgpack:"c"` // unix seconds
}

func idemKey(account, key string) []byte {
	b := make([]byte, 0, 2+len(account)+len(key))
	b = append(b, eventlog.KeyspaceIdempotency)
	b = append(b, account...)
	b = append(b, 0)
	return append(b, key...)
}

// loadIdempotency reads the recorded answers still inside the window.
func loadIdempotency(store *eventlog.Store, now time.Time) (map[string]*idemRecord, error) {
	out := map[string]*idemRecord{}
	err := store.Scan([]byte{eventlog.KeyspaceIdempotency}, func(k, v []byte) error {
		var r idemRecord
		if err := msgpack.Unmarshal(v, &r); err != nil || r.Response == nil {
			return nil // a damaged bookkeeping entry only loses a replay
		}
		if now.Sub(time.Unix(r.Created, 0)) < IdempotencyWindow {
			out[string(k)] = &r
		}
		return nil
	})
	return out, err
}

// idempotent runs cmd under its Idempotency-Key: a recorded answer is
// replayed, a new one recorded in the same transaction as the events.
func (p *Projections) idempotent(tx *eventlog.Txn, cmd Command) (outcome, error) {
	id := cmd.Idem
	k := idemKey(cmd.Account, id.Key)
	if r := p.idem[string(k)]; r != nil && id.Now.Sub(time.Unix(r.Created, 0)) < IdempotencyWindow {
		if r.Fingerprint != id.Fingerprint {
			return outcome{err: ParamErrorf(EIdempotencyConflict, "Idempotency-Key",
				"this Idempotency-Key was used with a different request in the last 24 hours")}, nil
		}
		return outcome{value: Replay{Response: r.Response}}, nil
	}
	out, broken := p.run(tx, cmd)
	if broken != nil {
		return out, broken
	}
	var domain *Error
	if out.err != nil && !errors.As(out.err, &domain) {
		return out, nil // storage trouble is not an answer to keep
	}
	r := &idemRecord{Fingerprint: id.Fingerprint, Response: id.Record(out.value, out.err), Created: id.Now.Unix()}
	// The command's events are in the transaction already: failing to
	// record its answer must abandon the group, not commit them.
	var buf bytes.Buffer
	if err := msgpack.NewEncoder(&buf).Encode(r); err != nil {
		return outcome{}, err
	}
	if _, err := tx.Add(nil, eventlog.Put{Key: k, Value: buf.Bytes()}); err != nil {
		return outcome{}, err
	}
	p.idem[string(k)] = r
	return outcome{value: Replay{Response: r.Response}, records: out.records}, nil
}
