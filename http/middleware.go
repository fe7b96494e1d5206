package http

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"demosvc/eventlog"
	"demosvc/projections"
)

// exchange is what the outer middleware learns about one request as it is
// served: the route pattern, the caller's account and the status. It also
// carries the route's parameters and the authenticated caller to the
// handler, in place of the request's context, where each value costs a
// copy of the request (Request.WithContext).
type exchange struct {
	http.ResponseWriter
	status    int
	wrote     bool
	route     string
	account   string
	params    httprouter.Params     // set by handle
	principal projections.Principal // set by authenticated
	// seqs, on a cluster's writer, is the log whose durable head goes in
	// a write's answer as X-Seq, and its position as X-Position
	// (cluster.go).
	seqs *eventlog.Log
}

func (e *exchange) WriteHeader(status int) {
	if status < 200 {
		e.ResponseWriter.WriteHeader(status) // informational: the answer is still to come
		return
	}
	if !e.wrote {
		e.status, e.wrote = status, true
		if e.seqs != nil && status < 400 {
			// A refused write made nothing to wait for: a follower that
			// forwarded it answers at once (a 401 is not held).
			h := e.Header()
			h.Set(HeaderSeq, strconv.FormatUint(e.seqs.DurableSeq(), 10))
			h.Set(HeaderPosition, strconv.FormatUint(e.seqs.ReplPos(), 10))
		}
	}
	e.ResponseWriter.WriteHeader(status)
}

func (e *exchange) Write(p []byte) (int, error) {
	if !e.wrote {
		e.WriteHeader(http.StatusOK)
	}
	return e.ResponseWriter.Write(p)
}

// setRoute names the route of the request w answers, for its log line and
// metrics.
func setRoute(w http.ResponseWriter, pattern string) {
	if ex, ok := w.(*exchange); ok {
		ex.route = pattern
	}
}

// Flush lets streaming handlers flush through the wrapper.
func (e *exchange) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// principal returns the authenticated caller of the request w answers.
// Every route is served through front, whose exchange w is.
func principal(w http.ResponseWriter) projections.Principal { return w.(*exchange).principal }

// param returns the route parameter name of the request w answers.
func param(w http.ResponseWriter, name string) string { return w.(*exchange).params.ByName(name) }

// front is what every request to the API address goes through, whichever
// handler serves it (the starting one, then the server): a request id,
// recovery from panics, one log line and the metrics.
type front struct {
	logger  *slog.Logger // panics, and the line of a request answered 5xx
	access  *AccessLog   // the line of every other request
	metrics *Metrics
	reqIDs  *requestIDs
	// forwardSecret, on a cluster node, is the nodes' secret with which
	// front takes the request id of a write another node forwarded
	// (forwardedRequestID); nil elsewhere.
	forwardSecret []byte
	proxies       proxies // whose forwarding headers name the client in the log line
	next          http.Handler
}

func newFront(logger *slog.Logger, access *AccessLog, metrics *Metrics, trusted proxies, next http.Handler) *front {
	return &front{logger: logger, access: access, metrics: metrics, reqIDs: newRequestIDs(), proxies: trusted, next: next}
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := ""
	if f.forwardSecret != nil {
		id = forwardedRequestID(r, f.forwardSecret)
	}
	if id == "" {
		id = f.reqIDs.New(start)
	}
	w.Header()[headerRequestID] = []string{id} // canonical already: Set would check it again
	ex := &exchange{ResponseWriter: w, status: http.StatusOK, route: "unmatched"}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			// The route, not the path: a dashboard setup link's path is
			// its token.
			f.logger.Error("panic serving request", "request_id", id, "method", r.Method, "route", ex.route,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if !ex.wrote {
				answerError(f.logger, ex, r, apiError(projections.EInternal, "", "internal error"))
			} else {
				// Part of an answer is out: ending it normally would hand
				// the client a cut list or export that looks whole. The
				// connection is reset instead, once this function has
				// written the request's line below.
				defer panic(http.ErrAbortHandler)
			}
		}
		// One monotonic reading: time.Now would read the wall clock as
		// well, a second vDSO call.
		elapsed := time.Since(start)
		end := start.Add(elapsed)
		f.metrics.observe(ex.route, r.Method, ex.status, elapsed)
		if ex.status < 500 && !f.access.on {
			return
		}
		line := access{method: r.Method, route: ex.route, status: ex.status, duration: elapsed,
			requestID: id, account: ex.account, client: f.proxies.clientAddr(r)}
		if ex.status < 500 {
			f.access.write(r.Context(), end, &line)
			return
		}
		// The record is handed to the handler directly, without the
		// caller's PC: slog would walk the stack for it.
		if h := f.logger.Handler(); h.Enabled(r.Context(), slog.LevelError) {
			rec := slog.NewRecord(end, slog.LevelError, "request", 0)
			rec.AddAttrs(line.attrs()...)
			_ = h.Handle(r.Context(), rec)
		}
	}()
	f.next.ServeHTTP(ex, r)
}

// route names the route pattern of a handler for logs and metrics.
func route(pattern string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		setRoute(w, pattern)
		h(w, r)
	}
}

// authenticated runs h for a caller with a valid, unrevoked key, within
// its account's rate limit. Otherwise it answers 401 unauthorized (with
// Retry-After once the client address has sent too many bad keys), or 429
// when the account is over its limit. A bad key is unauthorized whatever
// the count, as the seed says; the count only asks the client to wait.
func (s *Server) authenticated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if eo, ok := err.(*ErrorObject); ok && eo.Code == projections.EInvalid {
			s.writeError(w, r, err) // two Authorization headers: a malformed request, not a bad key
			return
		}
		if err != nil {
			d := s.badAuth.Take(LimiterKey(s.proxies.clientAddr(r)), s.deps.Config.Auth.FailuresPerMinute)
			if !d.Allowed {
				setRetryAfter(w, d)
				s.writeError(w, r, apiError(EUnauthorized, "",
					"too many requests with a bad API key from this address; retry in %s", retryWords(d)))
				return
			}
			s.writeError(w, r, err)
			return
		}
		ex := w.(*exchange)
		ex.account, ex.principal = p.Account.ID, p
		d := s.accounts.Take(p.Account.ID, s.planLimit(p.Account))
		setRateLimitHeaders(w, d)
		if !d.Allowed {
			setRetryAfter(w, d)
			s.writeError(w, r, apiError(ERateLimited, "",
				"rate limit of %d requests per minute exceeded; retry in %s", d.Limit, retryWords(d)))
			return
		}
		if s.deps.Cluster != nil && !s.awaitMinSeq(w, r) {
			return
		}
		h(w, r)
	}
}

// authenticate checks the Authorization header.
func (s *Server) authenticate(r *http.Request) (projections.Principal, error) {
	// Indexed by its canonical name, as net/http stores it: Get and
	// Values canonicalize the name on every call.
	hs := r.Header["Authorization"]
	if len(hs) > 1 {
		return projections.Principal{}, apiError(projections.EInvalid, "",
			"send one Authorization header, not %d", len(hs))
	}
	h := ""
	if len(hs) == 1 {
		h = hs[0]
	}
	if h == "" {
		return projections.Principal{}, apiError(EUnauthorized, "",
			"missing Authorization header; send Authorization: Bearer <API key>")
	}
	scheme, key, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return projections.Principal{}, apiError(EUnauthorized, "",
			"the Authorization header must use the Bearer scheme: Authorization: Bearer <API key>")
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return projections.Principal{}, apiError(EUnauthorized, "", "the Bearer token is empty")
	}
	p, found := s.deps.State.Authenticate(key)
	if !found {
		return projections.Principal{}, apiError(EUnauthorized, "", "invalid API key")
	}
	return p, nil
}

// planLimit returns an account's requests per minute; 0 is unlimited.
func (s *Server) planLimit(a projections.Account) int { return PlanLimit(s.deps.Config, a) }

// setRateLimitHeaders sets the IETF RateLimit headers of a limited account.
func setRateLimitHeaders(w http.ResponseWriter, d Decision) {
	if d.Limit == 0 {
		return
	}
	h := w.Header()
	h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=60`, d.Limit))
	h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, d.Remaining, ceilSeconds(d.Reset)))
}

func setRetryAfter(w http.ResponseWriter, d Decision) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, ceilSeconds(d.RetryAfter))))
}

func retryWords(d Decision) string {
	return fmt.Sprintf("%d s", max(1, ceilSeconds(d.RetryAfter)))
}

func ceilSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
