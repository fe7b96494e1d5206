package http

import (
	crand "crypto/rand"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"demosvc/eventlog"
)

// headerRequestID carries a request's id on its answer, and on a write a
// cluster node forwards to the writer.
const headerRequestID = "X-Request-Id"

// requestIDs mints request ids cheaply: a ULID of the current time whose
// entropy is a per-process random prefix and a counter. They are unique
// and sortable but not secret, which is all a request id needs.
type requestIDs struct {
	prefix [6]byte
	n      atomic.Uint32
}

// newRequestIDs returns a request id source with a random prefix.
func newRequestIDs() *requestIDs {
	r := &requestIDs{}
	crand.Read(r.prefix[:])
	return r
}

// New returns "req_" + 26 lowercase ULID characters, for a request that
// arrived at t.
func (r *requestIDs) New(t time.Time) string {
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(t))
	copy(id[6:12], r.prefix[:])
	n := r.n.Add(1)
	id[12], id[13], id[14], id[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return eventlog.FormatID("req_", id)
}

// forwardedRequestID is the request id a cluster node forwarding r gave
// it, if r is a write forwarded by a node (its marker signed with the
// nodes' secret) that carries one in the form New makes; "" otherwise. A
// client that sends both headers itself cannot sign the marker: its
// request gets an id of this node's, as does every read.
func forwardedRequestID(r *http.Request, secret []byte) string {
	if !isWrite(r.Method) || !forwardedByANode(secret, r) {
		return ""
	}
	id := r.Header.Get(headerRequestID)
	rest, ok := strings.CutPrefix(id, "req_")
	if !ok || len(rest) != ulid.EncodedSize {
		return ""
	}
	for i := 0; i < len(rest); i++ {
		if !strings.ContainsRune(lowerCrockford, rune(rest[i])) {
			return ""
		}
	}
	return id
}

// lowerCrockford is the alphabet of a request id's ULID.
const lowerCrockford = "0123456789abcdefghjkmnpqrstvwxyz"
