package delivery

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"demosvc/eventlog"
	"demosvc/eventlog/msgp"
)

// Deliveries and attempts are encoded by hand, each write's keys and
// values in one buffer: every delivery is stored twice (before its first
// attempt, then with its outcome) beside an attempt's detail, and
// msgpack's reflective encoder, growing a buffer per value, was a tenth of
// the delivery loop's garbage. The bytes are the ones msgpack.Marshal
// writes (codec_test.go holds them equal), so the records read back
// through msgpack as before, and records already stored need nothing.

// appendDelivery appends d as msgpack.Marshal(d) encodes it: a map of its
// fields under their msgpack names, in the struct's order.
func appendDelivery(b []byte, d *Delivery) []byte {
	b = msgp.AppendMapLen(b, 15)
	b = msgp.AppendStr(msgp.AppendStr(b, "id"), d.ID)
	b = msgp.AppendStr(msgp.AppendStr(b, "wh"), d.WebhookID)
	b = msgp.AppendStr(msgp.AppendStr(b, "ev"), d.EventID)
	b = msgp.AppendStr(msgp.AppendStr(b, "e"), d.Event)
	b = msgp.AppendUint64(msgp.AppendStr(b, "s"), d.Seq)
	b = msgp.AppendBin(msgp.AppendStr(b, "b"), d.Body)
	b = msgp.AppendStr(msgp.AppendStr(b, "st"), d.Status)
	b = msgp.AppendInt(msgp.AppendStr(b, "a"), int64(d.Attempts))
	b = msgp.AppendInt(msgp.AppendStr(b, "c"), int64(d.LastStatusCode))
	b = msgp.AppendStr(msgp.AppendStr(b, "er"), d.LastError)
	b = msgp.AppendInt64(msgp.AppendStr(b, "n"), d.NextAttemptAt)
	b = msgp.AppendInt64(msgp.AppendStr(b, "ca"), d.CreatedAt)
	b = msgp.AppendInt64(msgp.AppendStr(b, "t"), d.EventAt)
	b = msgp.AppendInt64(msgp.AppendStr(b, "ua"), d.UpdatedAt)
	return msgp.AppendInt(msgp.AppendStr(b, "as"), int64(d.Serial))
}

// deliverySize bounds what appendDelivery appends for d: the map header
// and the names (39 bytes), a header or an integer of at most 9 bytes for
// each value, and the variable bytes.
func deliverySize(d *Delivery) int {
	return 39 + 15*9 + len(d.ID) + len(d.WebhookID) + len(d.EventID) + len(d.Event) + len(d.Body) +
		len(d.Status) + len(d.LastError)
}

// appendAttempt appends a as msgpack.Marshal(a) encodes it, but for the
// order of each header map's entries, which msgpack leaves to Go's map
// iteration as well.
func appendAttempt(b []byte, a *Attempt) []byte {
	b = msgp.AppendMapLen(b, 8)
	b = msgp.AppendInt(msgp.AppendStr(b, "n"), int64(a.N))
	b = msgp.AppendInt64(msgp.AppendStr(b, "t"), a.StartedAt)
	b = msgp.AppendInt64(msgp.AppendStr(b, "d"), a.DurationMS)
	b = msgp.AppendInt(msgp.AppendStr(b, "c"), int64(a.StatusCode))
	b = msgp.AppendStr(msgp.AppendStr(b, "e"), a.Error)
	if a.RequestHeaders == nil && a.sent.n > 0 {
		b = appendPairs(msgp.AppendStr(b, "rq"), a.sent.pairs())
	} else {
		b = appendHeaders(msgp.AppendStr(b, "rq"), a.RequestHeaders)
	}
	if a.ResponseHeaders == nil && a.answer != nil {
		b = appendAnswerHeader(msgp.AppendStr(b, "rs"), a.answer)
	} else {
		b = appendHeaders(msgp.AppendStr(b, "rs"), a.ResponseHeaders)
	}
	return msgp.AppendBin(msgp.AppendStr(b, "b"), a.ResponseBody)
}

// appendAnswerHeader appends h as appendHeaders appends the map of its
// names to their values joined with ", ".
func appendAnswerHeader(b []byte, h http.Header) []byte {
	b = msgp.AppendMapLen(b, len(h))
	for k, vs := range h {
		b = msgp.AppendStr(b, k)
		if len(vs) == 1 {
			b = msgp.AppendStr(b, vs[0])
		} else {
			b = msgp.AppendStr(b, strings.Join(vs, ", "))
		}
	}
	return b
}

// appendPairs appends the names and values of kv, each name followed by
// its value, as appendHeaders appends the map of them.
func appendPairs(b []byte, kv []string) []byte {
	b = msgp.AppendMapLen(b, len(kv)/2)
	for _, s := range kv {
		b = msgp.AppendStr(b, s)
	}
	return b
}

func appendHeaders(b []byte, h map[string]string) []byte {
	if h == nil {
		return msgp.AppendNil(b)
	}
	b = msgp.AppendMapLen(b, len(h))
	for k, v := range h {
		b = msgp.AppendStr(msgp.AppendStr(b, k), v)
	}
	return b
}

// attemptSize bounds what appendAttempt appends for a: the map header and
// the names (20 bytes), a header or an integer of at most 9 bytes for each
// value, and the variable bytes.
func attemptSize(a *Attempt) int {
	answer := headersSize(a.ResponseHeaders)
	if a.ResponseHeaders == nil && a.answer != nil {
		answer = 5
		for k, vs := range a.answer {
			answer += 10 + len(k) + 2*len(vs)
			for _, v := range vs {
				answer += len(v)
			}
		}
	}
	request := headersSize(a.RequestHeaders)
	if a.RequestHeaders == nil && a.sent.n > 0 {
		request = 5
		for _, s := range a.sent.pairs() {
			request += 5 + len(s)
		}
	}
	return 20 + 8*9 + len(a.Error) + request + answer + len(a.ResponseBody)
}

func headersSize(h map[string]string) int {
	n := 5
	for k, v := range h {
		n += 10 + len(k) + len(v)
	}
	return n
}

// writeBuf holds one write's puts, their keys and values in one buffer.
// Buffers are reused from write to write (writeBufs): a stateWriter has
// copied the puts when StartWriteSync returns, and every delivery is
// written twice, its body each time, beside its attempt's detail.
type writeBuf struct {
	b    []byte
	puts []eventlog.Put
}

var writeBufs = sync.Pool{New: func() any { return new(writeBuf) }}

// maxPooledWrite is the largest buffer kept for another write: a step of
// new deliveries (maxCollectBytes of bodies) fits.
const maxPooledWrite = 2 * maxCollectBytes

// keptAttempt is the detail of an attempt of delivery id, waiting for its
// batch's write.
type keptAttempt struct {
	id     string
	detail Attempt
}

// encode returns the puts that store ds and, if indexed, their entries in
// the event index, then the details of attempts, with room for more puts.
// Release it once its puts are written.
func encode(wh string, ds []*Delivery, indexed bool, attempts []keptAttempt) *writeBuf {
	size, n := 0, len(ds)*(1+btoi(indexed))+len(attempts)
	for _, d := range ds {
		size += 2*(len(wh)+len(d.ID)+16) + deliverySize(d)
	}
	for i := range attempts {
		size += len(wh) + len(attempts[i].id) + 8 + attemptSize(&attempts[i].detail)
	}
	w := writeBufs.Get().(*writeBuf)
	w.b = slices.Grow(w.b[:0], size) // enough: no put's bytes move
	w.puts = slices.Grow(w.puts[:0], n+4)
	for _, d := range ds {
		k := len(w.b)
		w.b = appendDeliveryKey(w.b, wh, d.ID)
		v := len(w.b)
		w.b = appendDelivery(w.b, d)
		w.add(k, v)
		if indexed {
			k = len(w.b)
			w.b = appendEventIndexKey(w.b, wh, d.Seq, d.ID)
			w.puts = append(w.puts, eventlog.Put{Key: w.b[k:len(w.b):len(w.b)]})
		}
	}
	for i := range attempts {
		a := &attempts[i]
		k := len(w.b)
		w.b = appendAttemptKey(w.b, wh, a.id, a.detail.N)
		v := len(w.b)
		w.b = appendAttempt(w.b, &a.detail)
		w.add(k, v)
	}
	return w
}

// add puts the key w.b[k:v] with the value from v to the end, neither
// reaching into the next.
func (w *writeBuf) add(k, v int) {
	w.puts = append(w.puts, eventlog.Put{Key: w.b[k:v:v], Value: w.b[v:len(w.b):len(w.b)]})
}

// release hands w back for another write, once its puts are written.
func (w *writeBuf) release() {
	clear(w.puts) // nor keep another write's extra puts alive
	if cap(w.b) <= maxPooledWrite {
		writeBufs.Put(w)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
