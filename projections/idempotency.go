package projections

import (
	"bytes"
	"errors"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
)

// IdempotencyWindow is how long a recorded response is replayed.
const IdempotencyWindow = 24 * time.Hour

// MaxIdempotencyKey is the longest Idempotency-Key accepted.
const MaxIdempotencyKey = 255

// Idempotency asks the writer to record a command's first response under
// Key and to replay it for a retry carrying the same key.
type Idempotency struct {
	Key string
	// Fingerprint identifies the request (method, path and body): a retry
	// with the same key and another fingerprint is refused.
	Fingerprint string
	// Encode renders the command's outcome as the HTTP response to
	// record. It is called on the writer for a result or an *Error.
	Encode func(value any, err error) (status int, body []byte)
	// Now is when the request arrived, for the 24 h window.
	Now time.Time
}

// Replay is the recorded response to an earlier request with the same
// Idempotency-Key: the caller sends it as it is.
type Replay struct {
	Status int
	Body   []byte
}

type idemRecord struct {
	Fingerprint string `msgpack:"f"`
	Status      int    `msgpack:"s"`
	Body        []byte `msgpack:"b"`
	Created     int64  `msgpack:"c"` // unix seconds
}

func idemKey(account, key string) []byte {
	b := make([]byte, 0, 2+len(account)+len(key))
	b = append(b, eventlog.KeyspaceIdempotency)
	b = append(b, account...)
	b = append(b, 0)
	return append(b, key...)
}

// loadIdempotency reads the recorded responses still inside the window.
func loadIdempotency(store *eventlog.Store, now time.Time) (map[string]*idemRecord, error) {
	out := map[string]*idemRecord{}
	err := store.Scan([]byte{eventlog.KeyspaceIdempotency}, func(k, v []byte) error {
		var r idemRecord
		if err := msgpack.Unmarshal(v, &r); err != nil {
			return nil // a damaged bookkeeping entry only loses a replay
		}
		if now.Sub(time.Unix(r.Created, 0)) < IdempotencyWindow {
			out[string(k)] = &r
		}
		return nil
	})
	return out, err
}

// idempotent runs cmd under its Idempotency-Key: a recorded response is
// replayed, a new one recorded in the same transaction as the events.
func (p *Projections) idempotent(tx *eventlog.Txn, cmd Command) (outcome, error) {
	id := cmd.Idem
	k := idemKey(cmd.Account, id.Key)
	if r := p.idem[string(k)]; r != nil && id.Now.Sub(time.Unix(r.Created, 0)) < IdempotencyWindow {
		if r.Fingerprint != id.Fingerprint {
			return outcome{err: ParamErrorf(EIdempotencyConflict, "Idempotency-Key",
				"this Idempotency-Key was used with a different request in the last 24 hours")}, nil
		}
		return outcome{value: Replay{Status: r.Status, Body: r.Body}}, nil
	}
	out, broken := p.run(tx, cmd)
	if broken != nil {
		return out, broken
	}
	var domain *Error
	if out.err != nil && !errors.As(out.err, &domain) {
		return out, nil // storage trouble is not a response to keep
	}
	status, body := id.Encode(out.value, out.err)
	r := &idemRecord{Fingerprint: id.Fingerprint, Status: status, Body: body, Created: id.Now.Unix()}
	// The command's events are in the transaction already: failing to
	// record its response must abandon the group, not commit them.
	var buf bytes.Buffer
	if err := msgpack.NewEncoder(&buf).Encode(r); err != nil {
		return outcome{}, err
	}
	if _, err := tx.Add(nil, eventlog.Put{Key: k, Value: buf.Bytes()}); err != nil {
		return outcome{}, err
	}
	p.idem[string(k)] = r
	return outcome{value: Replay{Status: status, Body: body}, records: out.records}, nil
}
