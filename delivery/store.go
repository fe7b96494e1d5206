package delivery

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
)

// Delivery statuses.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Delivery is one event for one webhook, with its attempt log. It is kept
// durably in the store's delivery keyspace; Body is the exact bytes every
// attempt sends.
type Delivery struct {
	ID             string `msgpack:"id"`
	WebhookID      string `msgpack:"wh"`
	EventID        string `msgpack:"ev"`
	Event          string `msgpack:"e"`
	Seq            uint64 `msgpack:"s"`
	Body           []byte `msgpack:"b"`
	Status         string `msgpack:"st"`
	Attempts       int    `msgpack:"a"`
	LastStatusCode int    `msgpack:"c"`
	LastError      string `msgpack:"er"`
	NextAttemptAt  int64  `msgpack:"n"` // unix ms; 0 when not pending
	CreatedAt      int64  `msgpack:"ca"`
	EventAt        int64  `msgpack:"t"` // the event's commit, unix ms
	UpdatedAt      int64  `msgpack:"ua"`
	// Serial counts the attempts ever made, which a retry does not reset:
	// it numbers the attempt detail (attemptlog.go).
	Serial int `msgpack:"as"`
}

// Keys: 'd' + webhook id + 0x00 + 'c' -> cursor (8 bytes, big-endian);
// 'd' + webhook id + 0x00 + 'r' + delivery id -> Delivery (msgpack).
func webhookPrefix(wh string) []byte { return appendWebhookPrefix(nil, wh) }
func appendWebhookPrefix(b []byte, wh string) []byte {
	return append(append(append(b, eventlog.KeyspaceDelivery), wh...), 0)
}
func cursorKey(wh string) []byte { return append(webhookPrefix(wh), 'c') }
func deliveryPrefix(wh string) []byte {
	return append(webhookPrefix(wh), 'r')
}
func deliveryKey(wh, id string) []byte { return appendDeliveryKey(nil, wh, id) }
func appendDeliveryKey(b []byte, wh, id string) []byte {
	return append(append(appendWebhookPrefix(b, wh), 'r'), id...)
}

// deliveryStore keeps each webhook's delivery state in the store's delivery
// keyspace, outside the log: its cursor (the last seq read) and its
// deliveries (the attempt log). Every write is one synced batch.
type deliveryStore struct {
	db *eventlog.Store // reads
	w  stateWriter     // writes
}

// stateWriter makes the delivery state's writes durable: the log
// (eventlog.Log.WriteSync), which on a single node writes to its store
// and on a cluster node appends them to the replicated log, so that every
// node holds the cursors and attempt log a new dispatcher resumes from.
// Both copy the puts before they return, and a write's buffer is reused
// then (writeBuf): an implementation must not keep them.
type stateWriter interface {
	WriteSync(puts []eventlog.Put, delFrom, delTo []byte) error
	StartWriteSync(puts []eventlog.Put, delFrom, delTo []byte) (wait func() error)
}

// cursor returns the webhook's stored cursor, if it has one.
func (s deliveryStore) cursor(wh string) (uint64, bool, error) {
	v, ok, err := s.db.Get(cursorKey(wh))
	if err != nil || !ok || len(v) != 8 {
		return 0, false, err
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// get returns one delivery of the webhook.
func (s deliveryStore) get(wh, id string) (Delivery, bool, error) {
	v, ok, err := s.db.Get(deliveryKey(wh, id))
	if err != nil || !ok {
		return Delivery{}, false, err
	}
	var d Delivery
	if err := msgpack.Unmarshal(v, &d); err != nil {
		return Delivery{}, false, err
	}
	return d, true, nil
}

// eachPending calls fn with every pending delivery of the webhook, oldest
// first.
func (s deliveryStore) eachPending(wh string, fn func(d *Delivery)) error {
	return s.db.Scan(deliveryPrefix(wh), func(_, v []byte) error {
		var d Delivery
		if err := msgpack.Unmarshal(v, &d); err != nil {
			return err
		}
		if d.Status == StatusPending {
			fn(&d)
		}
		return nil
	})
}

// page returns at most limit deliveries of the webhook before
// startingAfter (a delivery id; "" for the most recent), most recent
// first, and whether more remain. Delivery ids sort by creation, so the
// page is read by a reverse scan that stops after it.
func (s deliveryStore) page(wh string, limit int, startingAfter string) ([]Delivery, bool, error) {
	var before []byte
	if startingAfter != "" {
		before = deliveryKey(wh, startingAfter)
	}
	var out []Delivery
	more := false
	var decodeErr error
	err := s.db.ScanReverse(deliveryPrefix(wh), before, func(_, v []byte) bool {
		if len(out) == limit {
			more = true
			return false
		}
		var d Delivery
		if decodeErr = msgpack.Unmarshal(v, &d); decodeErr != nil {
			return false
		}
		out = append(out, d)
		return true
	})
	if err == nil {
		err = decodeErr
	}
	return out, more, err
}

// put stores ds in one synced write.
func (s deliveryStore) put(wh string, ds ...*Delivery) error {
	return s.putWith(wh, nil, nil, nil, ds...)
}

// putWith stores ds and extra, and deletes the keys in [delFrom, delTo),
// in one synced write.
func (s deliveryStore) putWith(wh string, extra []eventlog.Put, delFrom, delTo []byte, ds ...*Delivery) error {
	return s.startPutWith(wh, extra, delFrom, delTo, ds...)()
}

// startPutWith is putWith that returns once the write is in the WAL,
// with the wait for its fsync (eventlog.Log.StartWriteSync).
func (s deliveryStore) startPutWith(wh string, extra []eventlog.Put, delFrom, delTo []byte, ds ...*Delivery) (wait func() error) {
	return s.startPut(encode(wh, ds, false, nil), extra, delFrom, delTo)
}

// startPutOutcomes stores ds with the details of their attempts, extra,
// and deletes the keys in [delFrom, delTo), in one synced write; it
// returns once the write is in the WAL, with the wait for its fsync.
func (s deliveryStore) startPutOutcomes(wh string, ds []*Delivery, attempts []keptAttempt, extra []eventlog.Put, delFrom, delTo []byte) (wait func() error) {
	return s.startPut(encode(wh, ds, false, attempts), extra, delFrom, delTo)
}

// startPutFresh stores new deliveries ds and their event index in one
// synced write, leaving the cursor where it is; it returns once the write
// is in the WAL, with the wait for its fsync.
func (s deliveryStore) startPutFresh(wh string, ds []*Delivery) (wait func() error) {
	return s.startPut(encode(wh, ds, true, nil), nil, nil, nil)
}

// startPutWithCursor stores ds, their event index and the webhook's cursor
// moved to cursor in one synced write, a crash leaving either all or none;
// it returns once the write is in the WAL, with the wait for its fsync.
func (s deliveryStore) startPutWithCursor(wh string, cursor uint64, ds []*Delivery) (wait func() error) {
	cur := eventlog.Put{Key: cursorKey(wh), Value: binary.BigEndian.AppendUint64(nil, cursor)}
	return s.startPut(encode(wh, ds, true, nil), []eventlog.Put{cur}, nil, nil)
}

// startPut starts the write of w's puts and extra, and releases w: the
// writer has copied them when StartWriteSync returns.
func (s deliveryStore) startPut(w *writeBuf, extra []eventlog.Put, delFrom, delTo []byte) (wait func() error) {
	w.puts = append(w.puts, extra...)
	wait = s.w.StartWriteSync(w.puts, delFrom, delTo)
	w.release()
	return wait
}

// webhooks returns the ids of the webhooks with delivery state, one
// seek each.
func (s deliveryStore) webhooks() ([]string, error) {
	keyspace := []byte{eventlog.KeyspaceDelivery}
	var ids []string
	from := keyspace
	for from != nil {
		next := []byte(nil)
		err := s.db.ScanFrom(keyspace, from, func(k, _ []byte) error {
			end := bytes.IndexByte(k, 0)
			if end < 0 {
				return fmt.Errorf("delivery state key %q has no webhook id", k)
			}
			ids = append(ids, string(k[1:end]))
			// Past every key of this webhook: its 0 separator is the
			// least byte that can follow the id.
			next = append(k[:end:end], 1)
			return errStop
		})
		if err != nil && !errors.Is(err, errStop) {
			return nil, err
		}
		from = next
	}
	return ids, nil
}

// forget drops a webhook's cursor and attempt log.
func (s deliveryStore) forget(wh string) error {
	p := webhookPrefix(wh)
	end := append([]byte(nil), p...)
	end[len(end)-1]++
	return s.w.WriteSync(nil, p, end)
}

// StartAt sets the cursor of each webhook to seq, in one synced write, so
// that it is sent only events after seq. `log import` calls it with the
// imported head: a restored history is not delivered again.
func StartAt(store *eventlog.Store, webhooks []string, seq uint64) error {
	if len(webhooks) == 0 {
		return nil
	}
	puts := make([]eventlog.Put, len(webhooks))
	for i, wh := range webhooks {
		puts[i] = eventlog.Put{Key: cursorKey(wh), Value: binary.BigEndian.AppendUint64(nil, seq)}
	}
	return store.WriteSync(puts, nil, nil)
}
