package delivery

import (
	"encoding/binary"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
)

// What the dashboard reads of a webhook's deliveries without walking its
// attempt log: the outcomes of its attempts per hour, and which deliveries
// an event caused. Both are written by the webhook's loop in the same synced batch as
// the deliveries they describe, so they are as durable as the attempt log.

// Outcomes counts the attempts of one hour by what became of them.
type Outcomes struct {
	Succeeded int `msgpack:"s"`
	Retrying  int `msgpack:"r"` // failed, a retry is scheduled
	Failed    int `msgpack:"f"` // failed, no retry left (or 410 Gone)
}

// Attempts is the number of attempts counted.
func (o Outcomes) Attempts() int { return o.Succeeded + o.Retrying + o.Failed }

// HourOutcomes is one hour of a webhook's attempts.
type HourOutcomes struct {
	Hour time.Time // its start, UTC
	Outcomes
}

// Keys: 'd' + webhook id + 0x00 + 'h' + hour (8 bytes, big-endian, hours
// since the epoch) -> Outcomes (msgpack); 'd' + webhook id + 0x00 + 's' +
// seq (8 bytes) + delivery id -> nothing: the deliveries an event caused.
func hourKey(wh string, hour int64) []byte {
	return binary.BigEndian.AppendUint64(append(webhookPrefix(wh), 'h'), uint64(hour))
}

func eventIndexKey(wh string, seq uint64, id string) []byte {
	return appendEventIndexKey(nil, wh, seq, id)
}
func appendEventIndexKey(b []byte, wh string, seq uint64, id string) []byte {
	return append(binary.BigEndian.AppendUint64(append(appendWebhookPrefix(b, wh), 's'), seq), id...)
}

// keepHours is how long hourly outcomes are kept: the dashboard shows 24.
const keepHours = 48

// hourlyCounts is a loop's running count of the current hours. Only the
// loop touches it.
type hourlyCounts struct {
	m     map[int64]*Outcomes
	dirty map[int64]bool
	// pruneBefore, when not 0, is the hour before which stored counts are
	// deleted with the next write: set once per new hour.
	pruneBefore int64
}

// prune returns the range of stored hours to delete with the next write,
// once per hour.
func (h *hourlyCounts) prune(wh string) (from, to []byte) {
	if h.pruneBefore == 0 {
		return nil, nil
	}
	from, to = hourKey(wh, 0), hourKey(wh, h.pruneBefore)
	h.pruneBefore = 0
	return from, to
}

// count adds the outcome of an attempt made at now, reading the hour's
// stored count the first time the loop touches that hour.
func (l *loop) count(v verdict, now time.Time) {
	h := &l.hours
	if h.m == nil {
		h.m, h.dirty = map[int64]*Outcomes{}, map[int64]bool{}
	}
	hour := now.Unix() / 3600
	o := h.m[hour]
	if o == nil {
		o = &Outcomes{}
		if v, ok, err := l.dp.store.db.Get(hourKey(l.t.ID, hour)); err == nil && ok {
			_ = msgpack.Unmarshal(v, o) // a damaged count starts again
		}
		h.m[hour] = o
		h.pruneBefore = hour - keepHours
		for old := range h.m {
			if old < hour-1 {
				delete(h.m, old)
			}
		}
	}
	switch v {
	case verdictSucceeded:
		o.Succeeded++
	case verdictRetrying:
		o.Retrying++
	default:
		o.Failed++
	}
	h.dirty[hour] = true
}

// hourPuts returns the writes of the hours counted since the last call.
func (l *loop) hourPuts() ([]eventlog.Put, error) {
	var puts []eventlog.Put
	for hour := range l.hours.dirty {
		v, err := msgpack.Marshal(l.hours.m[hour])
		if err != nil {
			return nil, err
		}
		puts = append(puts, eventlog.Put{Key: hourKey(l.t.ID, hour), Value: v})
		delete(l.hours.dirty, hour)
	}
	return puts, nil
}

// Hourly returns the outcomes of a webhook's attempts in each of the n
// hours up to now, oldest first: n keys read, whatever the webhook sent.
func (dp *Dispatcher) Hourly(wh string, now time.Time, n int) ([]HourOutcomes, error) {
	last := now.Unix() / 3600
	out := make([]HourOutcomes, n)
	for i := range out {
		out[i].Hour = time.Unix((last-int64(n-1)+int64(i))*3600, 0).UTC()
	}
	from := hourKey(wh, last-int64(n-1))
	err := dp.store.db.ScanFrom(append(webhookPrefix(wh), 'h'), from, func(k, v []byte) error {
		hour := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
		i := int(hour - (last - int64(n-1)))
		if i < 0 || i >= n {
			return nil
		}
		return msgpack.Unmarshal(v, &out[i].Outcomes)
	})
	return out, err
}

// DeliveriesOfEvent returns the deliveries to webhook wh that the record
// at seq caused (one, or none when it was not sent to wh).
func (dp *Dispatcher) DeliveriesOfEvent(wh string, seq uint64) ([]Delivery, error) {
	prefix := binary.BigEndian.AppendUint64(append(webhookPrefix(wh), 's'), seq)
	var ids []string
	if err := dp.store.db.Scan(prefix, func(k, _ []byte) error {
		ids = append(ids, string(k[len(prefix):]))
		return nil
	}); err != nil {
		return nil, err
	}
	var out []Delivery
	for _, id := range ids {
		d, ok, err := dp.store.get(wh, id)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// Delivery returns one delivery of webhook wh, or ErrNoDelivery.
func (dp *Dispatcher) Delivery(wh, id string) (Delivery, error) {
	d, ok, err := dp.store.get(wh, id)
	if err == nil && !ok {
		err = ErrNoDelivery
	}
	return d, err
}
