package http

import (
	crand "crypto/rand"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
)

// RequestIDs mints request ids cheaply: a ULID of the current time whose
// entropy is a per-process random prefix and a counter. They are unique
// and sortable but not secret, which is all a request id needs.
type RequestIDs struct {
	prefix [6]byte
	n      atomic.Uint32
}

// NewRequestIDs returns a request id source with a random prefix.
func NewRequestIDs() *RequestIDs {
	r := &RequestIDs{}
	crand.Read(r.prefix[:])
	return r
}

// New returns "req_" + 26 lowercase ULID characters.
func (r *RequestIDs) New() string {
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(time.Now()))
	copy(id[6:12], r.prefix[:])
	n := r.n.Add(1)
	id[12], id[13], id[14], id[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	var buf [4 + ulid.EncodedSize]byte
	copy(buf[:], "req_")
	_ = id.MarshalTextTo(buf[4:])
	for i := 4; i < len(buf); i++ {
		if c := buf[i]; c >= 'A' && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	return string(buf[:])
}
