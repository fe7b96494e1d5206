package http

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"unicode/utf8"

	"demosvc/projections"
)

// The domain keeps an idempotent command's first answer as bytes it never
// reads; this layer decides what they are: the response's status, two
// bytes big-endian, then its body, as the first request got them. Every
// retry gets the same status and the same bytes.

// idempotency reads the Idempotency-Key of a POST. Without one it returns
// nil; on a bad key it has answered. status is the command's status on
// success.
func (s *Server) idempotency(w http.ResponseWriter, r *http.Request, body []byte, status int) (*projections.Idempotency, bool) {
	keys := r.Header["Idempotency-Key"]
	if len(keys) > 1 {
		// Which one a retry would carry is anyone's guess: neither is kept.
		s.writeError(w, r, apiError(projections.EInvalid, "Idempotency-Key",
			"send one Idempotency-Key header, not %d", len(keys)))
		return nil, false
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return nil, true
	}
	if len(key) > projections.MaxIdempotencyKey && utf8.RuneCountInString(key) > projections.MaxIdempotencyKey {
		s.writeError(w, r, apiError(projections.EInvalid, "Idempotency-Key",
			"Idempotency-Key must be at most %d characters", projections.MaxIdempotencyKey))
		return nil, false
	}
	sum := sha256.New()
	sum.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
	sum.Write(body)
	return &projections.Idempotency{
		Key:         key,
		Fingerprint: hex.EncodeToString(sum.Sum(nil)),
		Now:         s.deps.Clock(),
		Record: func(v any, err error) []byte {
			rec := &bodyRecorder{header: http.Header{}}
			s.respond(rec, r, status, v, err)
			return append(binary.BigEndian.AppendUint16(nil, uint16(rec.status)), rec.body.Bytes()...)
		},
	}, true
}

// replay writes a recorded answer as the first request got it.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, rep projections.Replay) {
	if len(rep.Response) < 2 || !validStatus(int(binary.BigEndian.Uint16(rep.Response))) {
		s.writeError(w, r, errors.New("a recorded idempotent response does not begin with a status"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(binary.BigEndian.Uint16(rep.Response)))
	w.Write(rep.Response[2:])
}

// bodyRecorder captures a response to record it for idempotent replays.
type bodyRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bodyRecorder) Header() http.Header         { return b.header }
func (b *bodyRecorder) WriteHeader(status int)      { b.status = status }
func (b *bodyRecorder) Write(p []byte) (int, error) { return b.body.Write(p) }
