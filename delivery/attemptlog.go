package delivery

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// maxKeptBody is what the attempt detail keeps of a receiver's answer.
const maxKeptBody = 4 << 10

// Attempt is one attempt of a delivery as the attempt detail shows it:
// when it started (on the delivery clock) and how long it took (real
// time), the receiver's status or the error, the request headers sent
// (signatures included: they are not secrets, and a receiver debugging
// its check needs them), the response headers and the first 4 KiB of the
// response body. It is stored beside its delivery and removed with it.
type Attempt struct {
	N               int               `msgpack:"n"`
	StartedAt       int64             `msgpack:"t"` // unix ms
	DurationMS      int64             `msgpack:"d"`
	StatusCode      int               `msgpack:"c"`
	Error           string            `msgpack:"e"`
	RequestHeaders  map[string]string `msgpack:"rq"`
	ResponseHeaders map[string]string `msgpack:"rs"`
	ResponseBody    []byte            `msgpack:"b"`
	// answer is the answer's header as read, written as ResponseHeaders
	// (each name's values joined with ", ") when that is nil, and sent the
	// request's, written as RequestHeaders when that is nil: an attempt
	// goes to its write without a map built only to be encoded.
	answer http.Header
	sent   sentHeaders
}

// Keys: 'd' + webhook id + 0x00 + 'a' + delivery id + serial (4 bytes,
// big-endian) -> Attempt (msgpack). The serial is the delivery's count of
// attempts ever made, which a manual retry or a recover does not reset.
func attemptPrefix(wh, id string) []byte {
	return append(append(webhookPrefix(wh), 'a'), id...)
}

func attemptKey(wh, id string, n int) []byte { return appendAttemptKey(nil, wh, id, n) }
func appendAttemptKey(b []byte, wh, id string, n int) []byte {
	return binary.BigEndian.AppendUint32(append(append(appendWebhookPrefix(b, wh), 'a'), id...), uint32(n))
}

// attemptsOf returns the attempts of a delivery, oldest first.
func (s deliveryStore) attemptsOf(wh, id string) ([]Attempt, error) {
	var out []Attempt
	p := attemptPrefix(wh, id)
	err := s.db.Scan(p, func(k, v []byte) error {
		if len(k) != len(p)+4 {
			return nil // another delivery whose id extends this one: none do, ids are fixed-length
		}
		var a Attempt
		if err := msgpack.Unmarshal(v, &a); err != nil {
			return err
		}
		if len(out) == maxShownAttempts { // the newest are kept: drop the oldest
			copy(out, out[1:])
			out = out[:len(out)-1]
		}
		out = append(out, a)
		return nil
	})
	return out, err
}

// maxShownAttempts bounds the attempts a delivery's detail shows, the
// newest: each may hold 4 KiB of answer and 4 KiB of its headers, and
// manual retries add attempts without end.
const maxShownAttempts = 100

// maxKeptHeader bounds the bytes (names and values) of a receiver's
// answer headers an attempt keeps, as maxKeptBody bounds its body: an
// answer's head may be 64 KiB, kept with every attempt until retention.
const maxKeptHeader = 4 << 10

// notKeptHeader names, in an attempt's kept answer headers, what was left
// out of them.
const notKeptHeader = "X-Demosvc-Not-Kept"

// keptHeader is h, or when its names and values pass maxKeptHeader bytes,
// the headers that fit, in name order, and notKeptHeader saying how many
// were left out.
func keptHeader(h http.Header) http.Header {
	size := 0
	for k, vs := range h {
		size += len(k)
		for _, v := range vs {
			size += len(v)
		}
	}
	if size <= maxKeptHeader {
		return h
	}
	out := http.Header{}
	size, left := 0, 0
	for _, k := range slices.Sorted(maps.Keys(h)) {
		n := len(k)
		for _, v := range h[k] {
			n += len(v)
		}
		if size+n > maxKeptHeader {
			left++
			continue
		}
		size += n
		out[k] = h[k]
	}
	out.Set(notKeptHeader, fmt.Sprintf("%d headers beyond the %d bytes kept", left, maxKeptHeader))
	return out
}

// derived are the request headers setHeaders writes from the delivery and
// the configuration alone: not stored with each attempt (they are most of
// its bytes), but put back when it is shown (withDerived). The others vary
// from one attempt to the next (signatures, timestamp, attempt number).
// (User-Agent is stored: it changes with demosvc's version, and an
// attempt shows the one it was sent with.)
var derived = []string{"Content-Type", "X-Service-Event-Id", "X-Service-Webhook-Id", "Webhook-Id"}

// withDerived puts back the derived request headers of an attempt of d,
// as setHeaders sent them.
func (a *Attempt) withDerived(d *Delivery, userAgent string) {
	h := make(map[string]string, len(a.RequestHeaders)+len(derived))
	for k, v := range a.RequestHeaders {
		h[k] = v
	}
	h["Content-Type"] = "application/json"
	if _, kept := h["User-Agent"]; !kept {
		h["User-Agent"] = userAgent // an attempt stored before User-Agent was: the closest there is
	}
	h["X-Service-Event-Id"], h["X-Service-Webhook-Id"] = d.EventID, d.WebhookID
	if _, standard := h["Webhook-Signature"]; standard {
		h["Webhook-Id"] = d.EventID
	}
	a.RequestHeaders = h
}

// DeliveryDetail is a delivery with every attempt kept of it.
type DeliveryDetail struct {
	Delivery
	Log []Attempt
}

// MarshalJSON renders the delivery as the attempt log does, plus
// attempt_log: its attempts, oldest first.
func (d DeliveryDetail) MarshalJSON() ([]byte, error) {
	base, err := d.Delivery.MarshalJSON()
	if err != nil {
		return nil, err
	}
	log := make([]json.RawMessage, 0, len(d.Log))
	for _, a := range d.Log {
		b, err := a.MarshalJSON()
		if err != nil {
			return nil, err
		}
		log = append(log, b)
	}
	tail, err := json.Marshal(log)
	if err != nil {
		return nil, err
	}
	out := append(base[:len(base)-1:len(base)-1], `,"attempt_log":`...)
	out = append(out, tail...)
	return append(out, '}'), nil
}

// MarshalJSON renders one attempt: attempt, started_at (RFC 3339 with
// milliseconds), duration_ms, status_code and error (null when none),
// request_headers, response_headers (null without an answer) and
// response_body (text, its first 4 KiB; bytes that are not UTF-8 as
// U+FFFD).
func (a Attempt) MarshalJSON() ([]byte, error) {
	var code *int
	if a.StatusCode != 0 {
		code = &a.StatusCode
	}
	var errText *string
	if a.Error != "" {
		errText = &a.Error
	}
	var body *string
	if a.ResponseHeaders != nil {
		b := strings.ToValidUTF8(string(a.ResponseBody), string(utf8.RuneError))
		body = &b
	}
	req := a.RequestHeaders
	if req == nil {
		req = map[string]string{}
	}
	return json.Marshal(struct {
		N               int               `json:"attempt"`
		StartedAt       string            `json:"started_at"`
		DurationMS      int64             `json:"duration_ms"`
		StatusCode      *int              `json:"status_code"`
		Error           *string           `json:"error"`
		RequestHeaders  map[string]string `json:"request_headers"`
		ResponseHeaders map[string]string `json:"response_headers"`
		ResponseBody    *string           `json:"response_body"`
	}{a.N, time.UnixMilli(a.StartedAt).UTC().Format("2006-01-02T15:04:05.000Z07:00"), a.DurationMS, code, errText,
		req, a.ResponseHeaders, body})
}
