package http

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"demosvc/eventlog"
	"demosvc/projections"
)

// In a cluster any node takes any request. Reads are served from the
// node's own state. A write goes to the writer: on the writer it runs
// here, elsewhere it is forwarded there, and the answering node waits
// until it has applied the write before it answers, so the client reads
// its write on the node it asked. Every write's answer carries X-Seq, the
// log seq the write is at or below; a request with X-Min-Seq: N waits,
// up to cluster.read_wait, until the node has applied seq N. It carries
// X-Position too, the position in the replicated log the write is at or
// below, and X-Min-Position waits for that: a write that adds only
// delivery state (a delivery's retry) moves the position, not the seq.

// Headers of the cluster protocol.
const (
	HeaderSeq         = "X-Seq"
	HeaderMinSeq      = "X-Min-Seq"
	HeaderPosition    = "X-Position"
	HeaderMinPosition = "X-Min-Position"
	headerForwarded   = "X-Demosvc-Forwarded-By"
)

// ClusterNode is what the API needs to know of the cluster.
type ClusterNode interface {
	// IsWriter reports whether this node takes writes now.
	IsWriter() bool
	// WriterAddr is the writer's API address (host:port), "" when no
	// node holds the writer lease.
	WriterAddr() string
	// Roles names this node's roles: writer or follower, and dispatcher.
	Roles() []string
	// Lag is how many entries of the replicated log this node has yet
	// to apply.
	Lag() uint64
	// Joined returns nil once this node holds a current copy of the
	// replicated log (and from then on); until then /readyz answers 503
	// "joining" with its error as the reason.
	Joined() error
	// Following returns nil while this node applies the replicated log,
	// and why once it stopped for good (an entry it could not apply);
	// /readyz then answers 503 "not_following".
	Following() error
	// InTouch returns nil while this node hears from the cluster, and why
	// once it has heard nothing for long enough that a writer elected
	// meanwhile may have taken writes it does not see; /readyz then
	// answers 503 "disconnected", and the node serves no request until it
	// hears again and has applied what it missed.
	InTouch() error
}

// ClusterOptions configures a cluster node's routing (Deps.Cluster).
type ClusterOptions struct {
	Node     ClusterNode
	Log      *eventlog.Log
	NodeName string
	Scheme   string        // "http" or "https": how the writer's API answers
	ReadWait time.Duration // the longest wait for X-Min-Seq, and for a forwarded write to arrive here
	// ForwardTimeout bounds the wait for the writer's answer to a
	// forwarded write: a writer that hangs, or that the network cut off,
	// is given up with a 503. serve gives half of http.write_timeout,
	// which leaves the 503 time to reach the client.
	ForwardTimeout time.Duration
	// RootCAs verify a writer that answers HTTPS; nil: the system's.
	RootCAs *x509.CertPool
	Logger  *slog.Logger
	// Secret, the same on every node (serve derives it from the master
	// key), signs the marker of a forwarded write (forwardMark), so that
	// a client cannot pass its request off as forwarded.
	Secret []byte
}

// forwardMark is the X-Demosvc-Forwarded-By value with which node forwards
// the write r (as it goes out) carrying request id: its name and a MAC,
// under the nodes' secret, of what identifies the write and of the
// forwarding chain the writer will trust, so that a mark seen once cannot
// vouch for another chain.
func forwardMark(secret []byte, node, id string, r *http.Request) string {
	return node + " " + forwardMAC(secret, node, id, r)
}

func forwardMAC(secret []byte, node, id string, r *http.Request) string {
	mac := hmac.New(sha256.New, secret)
	for _, part := range []string{node, id, r.Method, r.URL.RequestURI(),
		strings.Join(r.Header["X-Forwarded-For"], "\n"), strings.Join(r.Header["Forwarded"], "\n")} {
		mac.Write([]byte(part))
		mac.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// forwardedByANode reports whether r carries the mark of a node that
// forwarded it: a marker a client sent itself, without the nodes' secret,
// is not one, and r is then served as the client's own request.
func forwardedByANode(secret []byte, r *http.Request) bool {
	vs := r.Header[headerForwarded] // most requests carry none: no canonicalizing, no MAC
	if len(vs) != 1 {
		return false
	}
	node, mac, ok := strings.Cut(vs[0], " ")
	if !ok || len(secret) == 0 {
		return false
	}
	want := forwardMAC(secret, node, r.Header.Get(headerRequestID), r)
	return hmac.Equal([]byte(mac), []byte(want))
}

// newClusterHandler puts the cluster's routing in front of api; the
// server puts front before it (Deps.Cluster).
//
// A forwarded write keeps the chain of addresses it came through: the
// request's own X-Forwarded-For and Forwarded, each with this node's peer
// added, so that a writer whose http.trusted_proxies lists the nodes (and
// the load balancer before them) names the client, not this node. It
// carries this node's request id, which the writer takes for its own (see
// front), so that one id names the request on both nodes. Over HTTPS the
// writer's certificate is verified for the address the writer advertises
// (cluster.advertise: a name its certificate covers), never for anything
// a client sends: connections are kept and shared.
func newClusterHandler(api http.Handler, o ClusterOptions) http.Handler {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		ResponseHeaderTimeout: o.ForwardTimeout,
		MaxIdleConnsPerHost:   64,
		// Forwarded writes past this many at once wait for a
		// connection (within the forward timeout). The writer does not
		// count the nodes of cluster.routes against
		// http.max_connections_per_client.
		MaxConnsPerHost: 256,
		IdleConnTimeout: 90 * time.Second,
	}
	proxy := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			to := r.In.Context().Value(forwardKey{}).(forward)
			r.SetURL(&url.URL{Scheme: o.Scheme, Host: to.writer})
			r.Out.Host = r.In.Host
			r.Out.Header["X-Forwarded-For"] = r.In.Header["X-Forwarded-For"]
			r.SetXForwarded()
			if peer, _, err := net.SplitHostPort(r.In.RemoteAddr); err == nil {
				for _, v := range r.In.Header.Values("Forwarded") {
					r.Out.Header.Add("Forwarded", v)
				}
				r.Out.Header.Add("Forwarded", `for="`+forwardedNode(peer)+`"`)
			}
			// This node's server answered the client's Expect already, as
			// the proxy read the body: the writer's 100 Continue, relayed,
			// would be taken for the answer's status.
			r.Out.Header.Del("Expect")
			r.Out.Header.Del(headerRequestID)
			if to.requestID != "" {
				r.Out.Header.Set(headerRequestID, to.requestID)
			}
			// Last, over the request as the writer will read it.
			r.Out.Header.Set(headerForwarded, forwardMark(o.Secret, o.NodeName, to.requestID, r.Out))
		},
		ModifyResponse: func(resp *http.Response) error {
			// The answer has this node's X-Request-Id, which the writer
			// took: the handler took it off the answer, since the proxy
			// adds the writer's headers to the ones set already.
			if id := resp.Request.Context().Value(forwardKey{}).(forward).requestID; id != "" {
				resp.Header.Set(headerRequestID, id)
			}
			// Answer only once this node has applied the write: its
			// records (X-Seq) and the entry it is in (X-Position; a
			// delivery's retry adds no record).
			seq, err := strconv.ParseUint(resp.Header.Get(HeaderSeq), 10, 64)
			if err != nil {
				return nil // refused before any write (an error object)
			}
			pos, _ := strconv.ParseUint(resp.Header.Get(HeaderPosition), 10, 64)
			ctx, cancel := context.WithTimeout(resp.Request.Context(), o.ReadWait)
			defer cancel()
			err = o.Log.WaitFor(ctx, seq)
			if err == nil {
				err = o.Log.WaitForPos(ctx, pos)
			}
			if err != nil {
				o.Logger.Warn("answering a forwarded write before this node applied it", "seq", seq, "position", pos, "err", err)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			to := r.Context().Value(forwardKey{}).(forward)
			o.Logger.Warn("forwarding a write to the writer", "writer", to.writer, "err", err)
			if to.requestID != "" {
				w.Header().Set(headerRequestID, to.requestID)
			}
			w.Header().Set("Retry-After", "1")
			unavailable(w, "the cluster's writer did not answer (it may be changing); the write may or may not have been made: retry it, with an Idempotency-Key to be safe")
		},
		ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := o.Node.Following(); err != nil && !openRoute(r.URL.Path) {
			// A write would be made, but never reach this node's state,
			// and a read would be answered from a state that misses
			// every change since: a key revoked, a user disabled.
			setRoute(w, routeCluster)
			w.Header().Set("Retry-After", "1")
			unavailable(w, "this node stopped following the cluster's log (see /readyz) and serves no requests: send them to another node")
			return
		}
		if err := o.Node.InTouch(); err != nil && !openRoute(r.URL.Path) {
			// Cut off from the cluster, this node's state may miss
			// any change made since, as above, until it hears again.
			setRoute(w, routeCluster)
			w.Header().Set("Retry-After", "1")
			unavailable(w, "this node has lost touch with the cluster (see /readyz) and serves no requests until it is back: send them to another node")
			return
		}
		if !isWrite(r.Method) {
			api.ServeHTTP(w, r)
			return
		}
		if o.Node.IsWriter() {
			// X-Seq goes on the answer as its header goes out: the write,
			// done by then, is at or below the log's durable head.
			if ex, ok := w.(*exchange); ok {
				ex.seqs = o.Log
			}
			api.ServeHTTP(w, r)
			return
		}
		addr := o.Node.WriterAddr()
		if addr == "" || forwardedByANode(o.Secret, r) {
			// No writer now, or one that just stopped being it: forwarding
			// again could loop.
			setRoute(w, routeCluster)
			w.Header().Set("Retry-After", "1")
			unavailable(w, "the cluster has no writer at the moment (one is being elected); retry shortly")
			return
		}
		setRoute(w, routeForwarded)
		to := forward{writer: addr, requestID: w.Header().Get(headerRequestID)}
		w.Header().Del(headerRequestID) // it comes back on the writer's answer
		// The forward timeout bounds the whole exchange, the wait for one
		// of the connections to the writer included: at MaxConnsPerHost,
		// a write waits for one before ResponseHeaderTimeout starts.
		ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), forwardKey{}, to), o.ForwardTimeout)
		defer cancel()
		proxy.ServeHTTP(w, r.WithContext(ctx))
	})
}

// The routes of the metrics and log lines of what the cluster handler
// answers itself, and of the writes it forwards (the writer's line and
// metrics name their route).
const (
	routeCluster   = "cluster"
	routeForwarded = "forwarded"
)

// awaitMinSeq waits, on a cluster node, until the node has applied the
// seq an authenticated request's X-Min-Seq names and the position its
// X-Min-Position names. It answers and returns false when a header is
// not a number, or the node did not get there within cluster.read_wait
// (both waits together).
func (s *Server) awaitMinSeq(w http.ResponseWriter, r *http.Request) bool {
	seqv, posv := r.Header.Get(HeaderMinSeq), r.Header.Get(HeaderMinPosition)
	if seqv == "" && posv == "" {
		return true
	}
	var seq, pos uint64
	var err error
	if seqv != "" {
		if seq, err = strconv.ParseUint(seqv, 10, 64); err != nil {
			s.writeError(w, r, apiError(projections.EInvalid, HeaderMinSeq, "X-Min-Seq must be a log seq (a non-negative integer)"))
			return false
		}
	}
	if posv != "" {
		if pos, err = strconv.ParseUint(posv, 10, 64); err != nil {
			s.writeError(w, r, apiError(projections.EInvalid, HeaderMinPosition, "X-Min-Position must be a position in the replicated log (a non-negative integer)"))
			return false
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.deps.Cluster.ReadWait)
	defer cancel()
	if err := s.deps.Log.WaitFor(ctx, seq); err != nil {
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, apiError(EUnavailable, "", "this node has applied the log up to seq %d, not yet %s; retry, or ask another node",
			s.deps.Log.DurableSeq(), seqv))
		return false
	}
	if err := s.deps.Log.WaitForPos(ctx, pos); err != nil {
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, apiError(EUnavailable, "", "this node has applied the replicated log up to position %d, not yet %s; retry, or ask another node",
			s.deps.Log.ReplPos(), posv))
		return false
	}
	return true
}

// forward is where a write goes, and the request id it goes with.
type forward struct {
	writer    string // the writer's advertised address, host:port
	requestID string // this node's, if front gave one
}

type forwardKey struct{}

// forwardedNode is addr as a Forwarded header's node: an IPv6 address in
// brackets (RFC 7239, 6).
func forwardedNode(addr string) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]"
	}
	return addr
}

// openRoute reports whether path is one of the routes open to anyone,
// which a node answers whether or not it follows the log.
func openRoute(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

func isWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

func unavailable(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: ErrorObject{Code: EUnavailable, Message: msg}})
}

// ClusterCollectors are the gauges of this node's place in the cluster.
func ClusterCollectors(node ClusterNode, log *eventlog.Log) []prometheus.Collector {
	role := func(name string) func() float64 {
		return func() float64 {
			for _, r := range node.Roles() {
				if r == name {
					return 1
				}
			}
			return 0
		}
	}
	var out []prometheus.Collector
	for _, name := range []string{"writer", "follower", "dispatcher"} {
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_cluster_role", Help: "1 when this node holds the role (writer, follower, dispatcher), else 0.",
			ConstLabels: prometheus.Labels{"role": name},
		}, role(name)))
	}
	return append(out,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_cluster_applied_seq", Help: "The last log seq this node has applied.",
		}, func() float64 { return float64(log.DurableSeq()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_cluster_applied_position", Help: "The last entry of the replicated log (stream sequence) this node has applied.",
		}, func() float64 { return float64(log.ReplPos()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_cluster_lag", Help: "Entries of the replicated log this node had yet to apply when it applied its last one.",
		}, func() float64 { return float64(node.Lag()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_cluster_following", Help: "1 while this node applies the replicated log, 0 once it stopped at an entry it could not apply (/readyz: not_following).",
		}, func() float64 {
			if node.Following() != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_cluster_in_touch", Help: "1 while this node hears from the cluster, 0 once no write of its has gone through for two lease TTLs, at least 15 s, and until, back, it has applied what it missed (/readyz: disconnected).",
		}, func() float64 {
			if node.InTouch() != nil {
				return 0
			}
			return 1
		}),
	)
}

// ClusterStatus adds this node's role, applied seq and lag to /readyz.
func (h *Health) ClusterStatus(node ClusterNode) {
	h.cluster.Store(&node)
}

// clusterInfo is the cluster part of /readyz, nil on a single node.
func (h *Health) clusterInfo() map[string]any {
	p := h.cluster.Load()
	if p == nil {
		return nil
	}
	node := *p
	return map[string]any{"roles": node.Roles(), "applied_seq": h.log.DurableSeq(),
		"applied_position": h.log.ReplPos(), "lag": node.Lag(), "writer": node.WriterAddr()}
}

// errNotWriter tells apart, in answerError, the writes the cluster did
// not take (retry) from storage failures (restart).
func errNotWriter(err error) bool {
	return errors.Is(err, eventlog.ErrNotWriter) || errors.Is(err, eventlog.ErrStale)
}
