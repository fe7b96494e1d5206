package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
)

// ErrorBody is the body of every non-2xx API response.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// writeJSON writes v as the JSON response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer putBodyBuffer(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal_error","message":"internal error"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// bodyBuffers keeps the buffers responses are encoded into: a list's
// body is several kilobytes, which every request would otherwise allocate
// and the collector free.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest buffer kept for reuse: a rare huge answer
// (an export page) does not pin its memory.
const maxPooledBody = 64 << 10

func putBodyBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBody {
		b.Reset()
		bodyBuffers.Put(b)
	}
}

// pageBuffers keeps the buffers a session, or a page of them, is written
// into (about 8.5 KB for 20).
var pageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 9<<10); return &b }}

func putPageBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBody {
		*b = (*b)[:0]
		pageBuffers.Put(b)
	}
}

// writeError answers with the error object for err (see answerError).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	answerError(s.deps.Logger, w, r, err)
}

// answerError answers with the error object for err. An error decided by
// this layer or by the domain is shown as it is; storage failure and
// shutdown are 503 unavailable; anything else is logged with its detail and
// shown as "internal error".
func answerError(logger *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	e, ok := shown(err)
	switch {
	case ok:
	case errNotWriter(err):
		w.Header().Set("Retry-After", "1")
		e = ErrorObject{Code: EUnavailable, Message: "the cluster's log did not take this write (its writer is changing); " +
			"nothing of it was made unless the log took it after all: retry it, with an Idempotency-Key to be safe"}
	case errors.Is(err, eventlog.ErrUnavailable):
		// Every write fails alike until a restart: one line per interval,
		// with the count of those left out, instead of one per request.
		if ok, dropped := refusedWrites.allow(time.Now()); ok {
			logger.Error("write refused: storage failed; restart demosvc once the disk is fixed", "err", err,
				"request_id", w.Header().Get("X-Request-Id"), "refusals_not_logged", dropped)
		}
		e = ErrorObject{Code: EUnavailable, Message: "the service stopped taking writes after a storage failure; " +
			"reads go on; it takes writes again once an operator has fixed the disk and restarted it"}
	case errors.Is(err, eventlog.ErrClosed):
		e = ErrorObject{Code: EUnavailable, Message: "the service is shutting down; retry shortly"}
	default:
		logger.Error("internal error", "err", err, "request_id", w.Header().Get("X-Request-Id"),
			"method", r.Method, "path", r.URL.Path)
		e = ErrorObject{Code: projections.EInternal, Message: "internal error"}
	}
	if e.Code == EUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="demosvc"`)
	}
	writeJSON(w, statusOf(e.Code), ErrorBody{Error: e})
}
