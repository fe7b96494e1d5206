// Package http is demosvc's transport: the public JSON API, the health and
// metrics endpoints, and the admin API the CLI reaches over a unix socket.
// It decodes, validates shape, calls the domain, and encodes; it decides
// nothing about state.
package http

import (
	"log/slog"
	"net/http"
	"time"

	"demosvc/config"
	"demosvc/delivery"
	"demosvc/eventlog"
	"demosvc/projections"
)

// Deps is everything the API server needs, given when it is built.
type Deps struct {
	Log    *eventlog.Log
	State  *projections.Projections // the rebuilt state; required
	Config *config.Config
	Logger *slog.Logger
	// AccessLog receives the one line per request; nil uses Logger. serve
	// gives it a writer that batches lines (logsink.go).
	AccessLog *AccessLog
	Metrics   *Metrics // nil: new metrics of their own
	// Deliveries serves the webhook attempt logs; nil answers 503 there.
	Deliveries *delivery.Dispatcher
	// Clock drives the rate limiters; nil means time.Now.
	Clock func() time.Time
	// Stopping is closed when the process begins to shut down: /readyz
	// answers 503 "stopping" from then on. nil never closes.
	Stopping <-chan struct{}
	// Health reports read-only storage and the background verification
	// on /readyz; the caller registers its Collectors. nil watches Log
	// with Stopping, without verification, and registers its gauges.
	Health *Health
	// Dashboard serves every path outside /v1, /healthz, /readyz and
	// /metrics; nil leaves them a JSON 404.
	Dashboard http.Handler
	// Cluster routes requests on a cluster node (cluster.go): writes to
	// the writer, X-Seq, X-Min-Seq, X-Position, X-Min-Position. nil on a single node.
	Cluster *ClusterOptions
}

// Server is the public HTTP API over a rebuilt state. Build it with
// NewServer; it is an http.Handler. Until the state is rebuilt, the API
// address is served by NewStarting instead (see Switch).
type Server struct {
	deps     Deps
	front    *front
	accounts *Limiters // per account
	badAuth  *Limiters // per client address, for requests with a bad key
	proxies  proxies   // http.trusted_proxies
}

// maxBadAuthClients bounds the client addresses whose failed
// authentications are being counted.
const maxBadAuthClients = 100_000

// NewServer returns the API server, ready: /readyz answers 200 until
// d.Stopping closes.
func NewServer(d Deps) *Server {
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(func() float64 { return float64(d.Log.DurableSeq()) })
	}
	if d.Health == nil {
		d.Health = NewHealth(d.Log, d.Stopping)
		d.Metrics.Registry.MustRegister(d.Health.Collectors()...)
	}
	s := &Server{
		deps:     d,
		proxies:  newProxies(d.Config),
		accounts: NewLimiters(d.Clock, 0),
		badAuth:  NewLimiters(d.Clock, maxBadAuthClients),
	}
	if d.Cluster != nil && len(d.Cluster.Secret) > 0 {
		secret := d.Cluster.Secret
		s.proxies.fromNode = func(r *http.Request) bool { return forwardedByANode(secret, r) }
	}
	access := d.AccessLog
	if access == nil {
		access = accessLogVia(d.Logger.Handler())
	}
	var next http.Handler = s.routes()
	if d.Cluster != nil {
		// Inside front: the cluster's own answers and forwarded writes
		// have a request id, a log line and their metrics too.
		next = newClusterHandler(next, *d.Cluster)
	}
	s.front = newFront(d.Logger, access, d.Metrics, s.proxies, next)
	if d.Cluster != nil {
		s.front.forwardSecret = d.Cluster.Secret
	}
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.front.ServeHTTP(w, r) }
