// Package http is demosvc's transport: the public JSON API, the health and
// metrics endpoints, and the admin API the CLI reaches over a unix socket.
// It decodes, validates shape, calls the domain, and encodes; it decides
// nothing about state.
package http

import (
	"log/slog"
	"net/http"
	"sync/atomic"

	"demosvc/eventlog"
)

// Deps is what the API server needs.
type Deps struct {
	Log    *eventlog.Log
	Logger *slog.Logger
}

// Server is the public HTTP API. Build it with NewServer; it is an
// http.Handler.
type Server struct {
	deps    Deps
	ready   atomic.Bool
	handler http.Handler
}

// NewServer returns the API server. It answers /readyz with 503 until
// SetReady(true).
func NewServer(d Deps) *Server {
	s := &Server{deps: d}
	s.handler = s.routes()
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// SetReady marks the server ready (state rebuilt from the log) or not.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }
