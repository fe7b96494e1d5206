package http

import (
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"demosvc/eventlog"
)

// headerRequestID carries a request's id on its answer, and on a write a
// cluster node forwards to the writer.
const headerRequestID = "X-Request-Id"

// requestIDs mints request ids cheaply: a ULID of the current time whose
// 80 bits of entropy come from the runtime's ChaCha8 generator. They are
// unique (two ids of one millisecond collide once in 2^40 pairs) and
// sortable by time, and say nothing of the server's traffic: a counter
// in them let any client count the requests of every other account
// between two of its own.
type requestIDs struct{}

// newRequestIDs returns a request id source.
func newRequestIDs() *requestIDs { return &requestIDs{} }

// New returns "req_" + 26 lowercase ULID characters, for a request that
// arrived at t.
func (*requestIDs) New(t time.Time) string {
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(t))
	binary.LittleEndian.PutUint64(id[6:14], rand.Uint64())
	binary.LittleEndian.PutUint16(id[14:16], uint16(rand.Uint32()))
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
