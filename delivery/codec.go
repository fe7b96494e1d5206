package delivery

import (
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
	b = appendHeaders(msgp.AppendStr(b, "rq"), a.RequestHeaders)
	b = appendHeaders(msgp.AppendStr(b, "rs"), a.ResponseHeaders)
	return msgp.AppendBin(msgp.AppendStr(b, "b"), a.ResponseBody)
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
	return 20 + 8*9 + len(a.Error) + headersSize(a.RequestHeaders) + headersSize(a.ResponseHeaders) + len(a.ResponseBody)
}

func headersSize(h map[string]string) int {
	n := 5
	for k, v := range h {
		n += 10 + len(k) + len(v)
	}
	return n
}

// encode returns the puts that store ds and, if indexed, their entries in
// the event index: keys and values in one buffer, with room for one more
// put.
func encode(wh string, ds []*Delivery, indexed bool) []eventlog.Put {
	size, n := 0, len(ds)
	for _, d := range ds {
		size += 2*(len(wh)+len(d.ID)+16) + deliverySize(d)
	}
	if indexed {
		n *= 2
	}
	buf := make([]byte, 0, size)
	puts := make([]eventlog.Put, 0, n+1)
	for _, d := range ds {
		k := len(buf)
		buf = appendDeliveryKey(buf, wh, d.ID)
		v := len(buf)
		buf = appendDelivery(buf, d)
		puts = append(puts, eventlog.Put{Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)]})
		if indexed {
			k = len(buf)
			buf = appendEventIndexKey(buf, wh, d.Seq, d.ID)
			puts = append(puts, eventlog.Put{Key: buf[k:len(buf):len(buf)]})
		}
	}
	return puts
}

// encodeAttempt returns the put that stores a, key and value in one buffer.
func encodeAttempt(wh, id string, a *Attempt) eventlog.Put {
	b := appendAttemptKey(make([]byte, 0, len(wh)+len(id)+8+attemptSize(a)), wh, id, a.N)
	k := len(b)
	b = appendAttempt(b, a)
	return eventlog.Put{Key: b[:k:k], Value: b[k:]}
}
