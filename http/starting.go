package http

import (
	"log/slog"
	"net/http"
	"sync/atomic"
)

// The API address answers from the moment serve listens, before the state
// is rebuilt from the log; NewServer needs the rebuilt state. So serve
// listens with the starting handler behind a Switch, builds the server
// with all its dependencies once replay is done, and switches to it.

// NewStarting returns what the API address answers while the state is
// rebuilt: /healthz is up, /readyz answers 503 "starting" (or "stopping"
// once the health's stopping closes), /metrics works, and every /v1 request is 503
// unavailable with Retry-After, so clients retry rather than fail.
func NewStarting(logger *slog.Logger, metrics *Metrics, health *Health) http.Handler {
	refuse := func(http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			answerError(logger, w, r, apiError(EUnavailable, "", "starting: the state is being rebuilt from the log; retry shortly"))
		}
	}
	return newFront(logger, accessLogVia(logger.Handler()), metrics, proxies{}, newRouter(logger, metrics, health.readiness(false), refuse))
}

// Switch is an http.Handler that serves through one handler, then another
// from the moment To is called: one atomic swap, so every request sees
// one or the other, whole.
type Switch struct {
	current atomic.Pointer[http.Handler]
}

// NewSwitch returns a Switch serving through first.
func NewSwitch(first http.Handler) *Switch {
	s := &Switch{}
	s.current.Store(&first)
	return s
}

// To serves every later request through h.
func (s *Switch) To(h http.Handler) { s.current.Store(&h) }

// ServeHTTP serves r through the current handler.
func (s *Switch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.current.Load()).ServeHTTP(w, r)
}
