// Package http is demosvc's transport: the public JSON API, the health and
// metrics endpoints, and the admin API the CLI reaches over a unix socket.
// It decodes, validates shape, calls the domain, and encodes; it decides
// nothing about state.
package http

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"demosvc/config"
	"demosvc/delivery"
	"demosvc/eventlog"
	"demosvc/projections"
)

// Deps is what the API server needs.
type Deps struct {
	Log *eventlog.Log
	// State may be nil at construction: the server then answers /v1 with
	// 503 until SetState, which a server gets once replay is done.
	State   *projections.Projections
	Config  *config.Config
	Logger  *slog.Logger
	Metrics *Metrics
	// Deliveries serves the webhook attempt logs; nil answers 503.
	Deliveries *delivery.Manager
	// Clock drives the rate limiters; nil means time.Now.
	Clock func() time.Time
}

// Server is the public HTTP API. Build it with NewServer; it is an
// http.Handler.
type Server struct {
	deps     Deps
	ready    atomic.Bool
	stopping atomic.Bool
	state    atomic.Pointer[projections.Projections]
	handler  http.Handler
	reqIDs   *requestIDs
	accounts *Limiters // per account
	badAuth  *Limiters // per client address, for requests with a bad key
}

// maxBadAuthClients bounds the client addresses whose failed
// authentications are being counted.
const maxBadAuthClients = 100_000

// NewServer returns the API server. It answers /readyz with 503 until
// SetReady(true).
func NewServer(d Deps) *Server {
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(func() float64 { return float64(d.Log.DurableSeq()) })
	}
	s := &Server{
		deps:     d,
		reqIDs:   newRequestIDs(),
		accounts: NewLimiters(d.Clock, 0),
		badAuth:  NewLimiters(d.Clock, maxBadAuthClients),
	}
	if d.State != nil {
		s.state.Store(d.State)
	}
	s.handler = s.routes()
	return s
}

// SetDeliveries gives the server the delivery manager, before SetState.
func (s *Server) SetDeliveries(m *delivery.Manager) { s.deps.Deliveries = m }

// SetState gives the server the rebuilt state and marks it ready.
func (s *Server) SetState(p *projections.Projections) {
	s.state.Store(p)
	s.ready.Store(true)
}

// st returns the state; the authenticated middleware has checked it is set.
func (s *Server) st() *projections.Projections { return s.state.Load() }

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serve(w, r) }

// SetReady marks the server ready (state rebuilt from the log) or not.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// SetStopping makes /readyz answer 503 "stopping" from now on.
func (s *Server) SetStopping() { s.stopping.Store(true) }

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.deps.Metrics }
