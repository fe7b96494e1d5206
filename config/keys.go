package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// keyDef describes one configuration key: where its value lives in Config
// and how it is validated once decoded.
type keyDef struct {
	key   string
	desc  string
	field func(c *Config) any   // pointer to the Config field holding the value
	check func(c *Config) error // validates that field; nil means any value is fine
}

// keyTable lists every known key. Keys() sorts it; the order here is the
// order of the Config struct.
var keyTable = []keyDef{
	{"listen", "TCP address (host:port) the HTTP server listens on",
		func(c *Config) any { return &c.Listen }, func(c *Config) error { return hostPort(c.Listen) }},
	{"data_dir", "directory holding the event log and snapshots",
		func(c *Config) any { return &c.DataDir }, func(c *Config) error { return nonEmpty(c.DataDir) }},
	{"log.level", "minimum log level: debug, info, warn or error",
		func(c *Config) any { return &c.Log.Level }, func(c *Config) error { return oneOf(c.Log.Level, "debug", "info", "warn", "error") }},
	{"log.format", "log output format: text or json",
		func(c *Config) any { return &c.Log.Format }, func(c *Config) error { return oneOf(c.Log.Format, "text", "json") }},
	{"http.max_body_bytes", "largest accepted request body in bytes",
		func(c *Config) any { return &c.HTTP.MaxBodyBytes }, func(c *Config) error { return positive(c.HTTP.MaxBodyBytes) }},
	{"http.max_header_bytes", "largest accepted request header block in bytes",
		func(c *Config) any { return &c.HTTP.MaxHeaderBytes }, func(c *Config) error { return positive(c.HTTP.MaxHeaderBytes) }},
	{"http.read_header_timeout", "time allowed to read request headers",
		func(c *Config) any { return &c.HTTP.ReadHeaderTimeout }, func(c *Config) error { return positive(c.HTTP.ReadHeaderTimeout) }},
	{"http.read_timeout", "time allowed to read a whole request",
		func(c *Config) any { return &c.HTTP.ReadTimeout }, func(c *Config) error { return positive(c.HTTP.ReadTimeout) }},
	{"http.write_timeout", "time allowed to write a response",
		func(c *Config) any { return &c.HTTP.WriteTimeout }, func(c *Config) error { return positive(c.HTTP.WriteTimeout) }},
	{"http.idle_timeout", "how long an idle keep-alive connection stays open",
		func(c *Config) any { return &c.HTTP.IdleTimeout }, func(c *Config) error { return positive(c.HTTP.IdleTimeout) }},
	{"http.max_connections", "client connections served at once; more wait to be accepted (0: half the process's open-file limit)",
		func(c *Config) any { return &c.HTTP.MaxConnections }, func(c *Config) error { return between(c.HTTP.MaxConnections, 0, math.MaxInt) }},
	{"http.max_connections_per_client", "connections one client address (an IPv6 client's /64) may hold open at once; more are closed as accepted (0: no limit; http.trusted_proxies are not limited)",
		func(c *Config) any { return &c.HTTP.MaxPerClient }, func(c *Config) error { return between(c.HTTP.MaxPerClient, 0, math.MaxInt) }},
	{"http.shutdown_timeout", "time allowed for in-flight requests on shutdown",
		func(c *Config) any { return &c.HTTP.ShutdownTimeout }, func(c *Config) error { return positive(c.HTTP.ShutdownTimeout) }},
	{"http.trusted_proxies", "comma-separated CIDRs or addresses of reverse proxies whose http.client_ip_header names the client (empty = trust none)",
		func(c *Config) any { return &c.HTTP.TrustedProxies }, func(c *Config) error { _, err := c.TrustedProxyPrefixes(); return err }},
	{"http.client_ip_header", "the one header a trusted proxy names the client in: X-Forwarded-For or Forwarded (RFC 7239); the other is ignored",
		func(c *Config) any { return &c.HTTP.ClientIPHeader }, func(c *Config) error {
			return oneOf(c.HTTP.ClientIPHeader, ClientIPXForwardedFor, ClientIPForwarded)
		}},
	{"tls.cert_file", "PEM certificate (chain) file: with tls.key_file, serve answers HTTPS; reloaded on SIGHUP",
		func(c *Config) any { return &c.TLS.CertFile }, nil},
	{"tls.key_file", "PEM private key file of tls.cert_file",
		func(c *Config) any { return &c.TLS.KeyFile }, nil},
	{"plans.starter", "requests per minute allowed on the starter plan",
		func(c *Config) any { return &c.Plans.Starter }, func(c *Config) error { return positive(c.Plans.Starter) }},
	{"plans.pro", "requests per minute allowed on the pro plan",
		func(c *Config) any { return &c.Plans.Pro }, func(c *Config) error { return positive(c.Plans.Pro) }},
	{"auth.failures_per_minute", "bad-key requests allowed per client address per minute",
		func(c *Config) any { return &c.Auth.FailuresPerMinute }, func(c *Config) error { return positive(c.Auth.FailuresPerMinute) }},
	{"leads.hot_threshold", "score (0..100) at which a lead counts as hot",
		func(c *Config) any { return &c.Leads.HotThreshold }, func(c *Config) error { return between(c.Leads.HotThreshold, 0, 100) }},
	{"delivery.timeout", "timeout for one webhook delivery attempt",
		func(c *Config) any { return &c.Delivery.Timeout }, func(c *Config) error { return positive(c.Delivery.Timeout) }},
	{"delivery.max_retries", "retries after a failed webhook delivery (0..10)",
		func(c *Config) any { return &c.Delivery.MaxRetries }, func(c *Config) error { return between(c.Delivery.MaxRetries, 0, 10) }},
	{"delivery.backoff", "wait before the first webhook retry",
		func(c *Config) any { return &c.Delivery.Backoff }, func(c *Config) error { return positive(c.Delivery.Backoff) }},
	{"delivery.backoff_factor", "multiplier applied to the wait after each retry (>= 1)",
		func(c *Config) any { return &c.Delivery.BackoffFactor }, func(c *Config) error { return atLeastOne(c.Delivery.BackoffFactor) }},
	{"delivery.concurrency", "webhook deliveries in flight per webhook (1..1024)",
		func(c *Config) any { return &c.Delivery.Concurrency }, func(c *Config) error { return between(c.Delivery.Concurrency, 1, 1024) }},
	{"delivery.allow_private_networks", "allow webhook targets on loopback and private networks",
		func(c *Config) any { return &c.Delivery.AllowPrivateNetworks }, nil},
	{"delivery.standard_webhooks", "sign deliveries with Standard Webhooks headers",
		func(c *Config) any { return &c.Delivery.StandardWebhooks }, nil},
	{"delivery.disable_after", "disable a webhook (reason failing) whose every attempt failed for this long (0 = never)",
		func(c *Config) any { return &c.Delivery.DisableAfter }, func(c *Config) error { return zeroOrAtLeast(c.Delivery.DisableAfter, time.Minute) }},
	{"delivery.retention", "remove deliveries and their attempts this old from the attempt log (0 = keep them)",
		func(c *Config) any { return &c.Delivery.Retention }, func(c *Config) error { return zeroOrAtLeast(c.Delivery.Retention, time.Minute) }},
	{"metrics.per_webhook", "label delivery lag by webhook id in /metrics (names tenants' webhooks; off by default)",
		func(c *Config) any { return &c.Metrics.PerWebhook }, nil},
	{"webhooks.max_per_account", "webhook subscriptions allowed per account (1..1000)",
		func(c *Config) any { return &c.Webhooks.MaxPerAccount }, func(c *Config) error { return between(c.Webhooks.MaxPerAccount, 1, 1000) }},
	{"bootstrap.plan", "plan of the account created at first start: starter, pro or enterprise",
		func(c *Config) any { return &c.Bootstrap.Plan }, func(c *Config) error { return oneOf(c.Bootstrap.Plan, "starter", "pro", "enterprise") }},
	{"snapshot.every", "write a snapshot every N events, or more apart for a large state (0 = only on shutdown)",
		func(c *Config) any { return &c.Snapshot.Every }, func(c *Config) error { return between(c.Snapshot.Every, 0, math.MaxInt) }},
	{"secrets.master_key", "standard base64 of a 32-byte key encrypting stored secrets",
		func(c *Config) any { return &c.Secrets.MasterKey }, func(c *Config) error { return masterKey(c.Secrets.MasterKey) }},
	{"dashboard.enabled", "serve the web dashboard on the API's address",
		func(c *Config) any { return &c.Dashboard.Enabled }, nil},
	{"dashboard.secure_cookies", "mark session cookies Secure with the __Host- prefix (set behind a TLS proxy; implied by an https dashboard.public_url)",
		func(c *Config) any { return &c.Dashboard.SecureCookies }, nil},
	{"dashboard.session_idle", "a dashboard session ends after this long without a request",
		func(c *Config) any { return &c.Dashboard.SessionIdle }, func(c *Config) error { return positive(c.Dashboard.SessionIdle) }},
	{"dashboard.session_max", "a dashboard session ends this long after sign-in, whatever its use",
		func(c *Config) any { return &c.Dashboard.SessionMax }, func(c *Config) error { return positive(c.Dashboard.SessionMax) }},
	{"dashboard.sign_in_per_minute", "sign-in attempts allowed per minute per client address and per e-mail",
		func(c *Config) any { return &c.Dashboard.SignInPerMinute }, func(c *Config) error { return positive(c.Dashboard.SignInPerMinute) }},
	{"dashboard.public_url", "base URL of printed setup links (empty = http://<listen address>)",
		func(c *Config) any { return &c.Dashboard.PublicURL }, func(c *Config) error { return baseURL(c.Dashboard.PublicURL) }},
	{"cluster.enabled", "run as one node of a cluster on a replicated NATS JetStream log (false = one node, its own log)",
		func(c *Config) any { return &c.Cluster.Enabled }, nil},
	{"cluster.name", "the cluster's name, the same on every node",
		func(c *Config) any { return &c.Cluster.Name }, func(c *Config) error { return natsName(c.Cluster.Name) }},
	{"cluster.node_name", "this node's name, unique in the cluster (required when cluster.enabled)",
		func(c *Config) any { return &c.Cluster.NodeName }, func(c *Config) error { return emptyOr(c.Cluster.NodeName, natsName) }},
	{"cluster.listen", "host:port the embedded NATS server's cluster routes listen on",
		func(c *Config) any { return &c.Cluster.Listen }, func(c *Config) error { return hostPort(c.Cluster.Listen) }},
	{"cluster.routes", "comma-separated host:port of every node's cluster.listen (this node's may be included)",
		func(c *Config) any { return &c.Cluster.Routes }, func(c *Config) error { _, err := c.ClusterRoutes(); return err }},
	{"cluster.client_listen", "host:port the embedded NATS server takes client connections on, such as the nats CLI's, each with cluster.client_token (empty = none: the node's own connection is in-process)",
		func(c *Config) any { return &c.Cluster.ClientListen }, func(c *Config) error { return emptyOr(c.Cluster.ClientListen, hostPort) }},
	{"cluster.client_token", "the token a NATS client must present at cluster.client_listen (at least 32 characters; a secret, never echoed)",
		func(c *Config) any { return &c.Cluster.ClientToken }, func(c *Config) error { return clientToken(c.Cluster.ClientToken) }},
	{"cluster.nats_url", "URL(s) of an external NATS cluster to use instead of the embedded server (empty = embedded)",
		func(c *Config) any { return &c.Cluster.NATSURL }, func(c *Config) error { return emptyOr(c.Cluster.NATSURL, natsURL) }},
	{"cluster.replicas", "copies of the log stream kept by the NATS cluster (1..5; 3 for three nodes)",
		func(c *Config) any { return &c.Cluster.Replicas }, func(c *Config) error { return between(c.Cluster.Replicas, 1, 5) }},
	{"cluster.lease_ttl", "how long the writer and dispatcher leases last without renewal (>= 1s)",
		func(c *Config) any { return &c.Cluster.LeaseTTL }, func(c *Config) error { return atLeast(c.Cluster.LeaseTTL, time.Second) }},
	{"cluster.read_wait", "how long a request with X-Min-Seq or X-Min-Position waits for this node to apply that far",
		func(c *Config) any { return &c.Cluster.ReadWait }, func(c *Config) error { return positive(c.Cluster.ReadWait) }},
	{"cluster.advertise", "host:port the other nodes reach this node's API at, to forward writes (empty = listen, which must then name this node: not every address, nor loopback while cluster.routes names other hosts)",
		func(c *Config) any { return &c.Cluster.Advertise }, func(c *Config) error { return emptyOr(c.Cluster.Advertise, hostPort) }},
	{"cluster.tls_cert_file", "this node's certificate (PEM): with cluster.tls_key_file and cluster.tls_ca_file, the routes between the nodes' NATS servers, or the connection to cluster.nats_url, use mutual TLS (empty = plain TCP)",
		func(c *Config) any { return &c.Cluster.TLSCertFile }, nil},
	{"cluster.tls_key_file", "the private key (PEM) of cluster.tls_cert_file",
		func(c *Config) any { return &c.Cluster.TLSKeyFile }, nil},
	{"cluster.tls_ca_file", "CA certificates (PEM) a peer's certificate (another node's, or the NATS servers') must chain to",
		func(c *Config) any { return &c.Cluster.TLSCAFile }, nil},
	{"testing.clock", "fixed RFC 3339 time for deterministic tests (empty = real clock)",
		func(c *Config) any { return &c.Testing.Clock }, func(c *Config) error { return rfc3339(c.Testing.Clock) }},
	{"testing.seed", "random seed for deterministic tests (0 = random)",
		func(c *Config) any { return &c.Testing.Seed }, nil},
}

// Default returns the default configuration. Every default passes the same
// validation as Load (the package tests enforce this).
func Default() *Config {
	c := &Config{Listen: "127.0.0.1:8080", DataDir: "./data"}
	c.Log.Level, c.Log.Format = "info", "text"
	c.HTTP.MaxBodyBytes = 1 << 20
	c.HTTP.MaxHeaderBytes = 16 << 10
	c.HTTP.MaxPerClient = 512
	c.HTTP.ReadHeaderTimeout = 5 * time.Second
	c.HTTP.ReadTimeout = 15 * time.Second
	c.HTTP.WriteTimeout = 30 * time.Second
	c.HTTP.IdleTimeout = 120 * time.Second
	c.HTTP.ShutdownTimeout = 15 * time.Second
	c.HTTP.ClientIPHeader = ClientIPXForwardedFor
	c.Plans.Starter, c.Plans.Pro = 60, 300
	c.Auth.FailuresPerMinute = 60
	c.Leads.HotThreshold = 80
	c.Delivery.Timeout = 5 * time.Second
	c.Delivery.MaxRetries = 3
	c.Delivery.Backoff = 30 * time.Second
	c.Delivery.BackoffFactor = 4
	c.Delivery.Concurrency = 16
	c.Delivery.StandardWebhooks = true
	c.Delivery.DisableAfter = 5 * 24 * time.Hour
	c.Delivery.Retention = 30 * 24 * time.Hour
	c.Webhooks.MaxPerAccount = 25
	c.Bootstrap.Plan = "pro"
	// Every snapshot walks the whole state. Under a sustained 30,000
	// writes a second, 100,000 events between them kept one running at
	// all times, and the same POST load cost 9-10% more server CPU than
	// at 250,000 (side by side, twice). After a crash, replaying 250,000
	// events takes about 0.2 s.
	c.Snapshot.Every = 250000
	c.Dashboard.Enabled = true
	c.Dashboard.SessionIdle = 12 * time.Hour
	c.Dashboard.SessionMax = 7 * 24 * time.Hour
	c.Dashboard.SignInPerMinute = 10
	c.Cluster.Name = "demosvc"
	c.Cluster.Listen = "127.0.0.1:6222"
	c.Cluster.Replicas = 3
	c.Cluster.LeaseTTL = 10 * time.Second
	c.Cluster.ReadWait = 5 * time.Second
	return c
}

// KeyInfo describes one configuration key for help output and documentation.
type KeyInfo struct {
	Key         string // dotted key, e.g. "delivery.timeout"
	Default     string // default value in the syntax Load accepts, e.g. "5s"
	Description string // one-line description
}

// Keys returns every known key sorted by name, with its default and a
// one-line description. The environment variable for a key is "DEMOSVC_"
// followed by the key upper-cased with "." replaced by "_".
func Keys() []KeyInfo {
	def := Default()
	out := make([]KeyInfo, 0, len(keyTable))
	for _, d := range keyTable {
		out = append(out, KeyInfo{Key: d.key, Default: render(d.field(def)), Description: d.desc})
	}
	slices.SortFunc(out, func(a, b KeyInfo) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// render formats a Config field (given by pointer) as Load would accept it.
func render(p any) string {
	switch v := p.(type) {
	case *string:
		return *v
	case *int:
		return strconv.Itoa(*v)
	case *int64:
		return strconv.FormatInt(*v, 10)
	case *float64:
		return strconv.FormatFloat(*v, 'g', -1, 64)
	case *bool:
		return strconv.FormatBool(*v)
	case *time.Duration:
		s := v.String() // "2m0s" reads better as "2m"
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	return fmt.Sprint(p)
}

// The values of http.client_ip_header. Only the one configured is read: a
// proxy that sets one of them passes the other through from the client
// as it came (nginx's $proxy_add_x_forwarded_for and Caddy set
// X-Forwarded-For and leave Forwarded alone), so reading both would let
// a client name its own address.
const (
	ClientIPXForwardedFor = "X-Forwarded-For"
	ClientIPForwarded     = "Forwarded"
)

// TrustedProxyPrefixes parses http.trusted_proxies; a bare address is a
// single-address prefix.
func (c *Config) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(c.HTTP.TrustedProxies, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an address", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// checkTogether checks what involves more than one key, once every
// source is merged.
func (c *Config) checkTogether() error {
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("config: tls.cert_file and tls.key_file go together: set both or neither")
	}
	if c.Cluster.Enabled && c.Cluster.NodeName == "" {
		return errors.New("config: cluster.enabled needs cluster.node_name, unique in the cluster")
	}
	if c.Cluster.Enabled && c.Secrets.MasterKey == "" {
		// Webhook secrets are sealed by the writer and opened by the
		// dispatcher: a key made per data dir would differ per node.
		return errors.New("config: cluster.enabled needs secrets.master_key, the same on every node")
	}
	if tls := c.Cluster.TLSCertFile != ""; tls != (c.Cluster.TLSKeyFile != "") || tls != (c.Cluster.TLSCAFile != "") {
		return errors.New("config: cluster.tls_cert_file, cluster.tls_key_file and cluster.tls_ca_file go together: set all three or none")
	}
	if c.Cluster.Enabled {
		if err := c.checkAdvertised(); err != nil {
			return err
		}
	}
	if (c.Cluster.ClientListen == "") != (c.Cluster.ClientToken == "") {
		// The NATS server carries the whole log and the leases that say
		// which node takes writes: no client of it goes unauthenticated.
		return errors.New("config: cluster.client_listen and cluster.client_token go together: set both or neither")
	}
	if c.Cluster.Enabled && c.Cluster.NATSURL == "" && c.Cluster.Replicas > 1 {
		routes, _ := c.ClusterRoutes()
		if len(routes) == 0 {
			return fmt.Errorf("config: cluster.replicas is %d but cluster.routes names no other node", c.Cluster.Replicas)
		}
	}
	return nil
}

// checkAdvertised refuses an address the other nodes of a cluster could
// not forward writes to: one that binds every address, or a loopback one
// while the routes name other hosts (they would forward to themselves).
func (c *Config) checkAdvertised() error {
	if c.Cluster.Advertise != "" {
		if host, _, _ := net.SplitHostPort(c.Cluster.Advertise); unspecified(host) {
			return fmt.Errorf("config: cluster.advertise %q names every address, not this node: give the host:port the other nodes reach its API at", c.Cluster.Advertise)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return nil // listen's own check says so
	}
	if unspecified(host) {
		return fmt.Errorf("config: listen %q binds every address, which does not tell the other nodes where to forward writes to this one: set cluster.advertise to the host:port they reach its API at", c.Listen)
	}
	if loopback(host) {
		routes, _ := c.ClusterRoutes()
		for _, r := range routes {
			if rh, _, err := net.SplitHostPort(r); err == nil && !loopback(rh) {
				return fmt.Errorf("config: listen %q is this machine only, but cluster.routes names other hosts (%s), which would forward writes to themselves: set cluster.advertise to the host:port they reach this node's API at", c.Listen, r)
			}
		}
	}
	return nil
}

// unspecified reports whether a host binds every address: "", 0.0.0.0,
// :: or ::ffff:0.0.0.0.
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsUnspecified()
}

// loopback reports whether host is this machine only: a loopback address
// or localhost.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// ClusterRoutes returns cluster.routes as a list of host:port.
func (c *Config) ClusterRoutes() ([]string, error) {
	var out []string
	for _, r := range strings.Split(c.Cluster.Routes, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if err := hostPort(r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// natsName accepts what NATS takes as a server or cluster name.
func natsName(v string) error {
	if v == "" || strings.ContainsAny(v, " \t\r\n.*>") {
		return fmt.Errorf("must be a non-empty name without spaces, '.', '*' or '>' (got %q)", v)
	}
	return nil
}

// RedactedURLs is v, comma-separated URLs, with any password or token in
// them (nats://user:pass@…, nats://TOKEN@…) left out, for logs and errors.
func RedactedURLs(v string) string {
	parts := strings.Split(v, ",")
	for i, s := range parts {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			u.User = url.User("xxxxx")
			parts[i] = u.String()
		} else if err != nil && strings.Contains(s, "@") {
			parts[i] = "xxxxx@" + s[strings.LastIndex(s, "@")+1:]
		}
	}
	return strings.Join(parts, ",")
}

// natsURL accepts comma-separated nats:// (or tls://) URLs.
func natsURL(v string) error {
	for _, s := range strings.Split(v, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
			return fmt.Errorf("must be nats://host:port URLs, comma-separated (got %q)", RedactedURLs(s))
		}
	}
	return nil
}

func emptyOr(v string, check func(string) error) error {
	if v == "" {
		return nil
	}
	return check(v)
}

func atLeast(v, lo time.Duration) error {
	if v < lo {
		return fmt.Errorf("must be >= %v (got %v)", lo, v)
	}
	return nil
}

func positive[T int | int64 | time.Duration](v T) error {
	if v <= 0 {
		return fmt.Errorf("must be > 0 (got %v)", v)
	}
	return nil
}

func between(v, lo, hi int) error {
	if v < lo || v > hi {
		if hi == math.MaxInt {
			return fmt.Errorf("must be >= %d (got %d)", lo, v)
		}
		return fmt.Errorf("must be %d..%d (got %d)", lo, hi, v)
	}
	return nil
}

// zeroOrAtLeast accepts 0 (off) or a duration of at least least.
func zeroOrAtLeast(v, least time.Duration) error {
	if v != 0 && v < least {
		return fmt.Errorf("must be 0 (off) or at least %v (got %v)", least, v)
	}
	return nil
}

func atLeastOne(v float64) error {
	if !(v >= 1) { // also rejects NaN
		return fmt.Errorf("must be >= 1 (got %v)", v)
	}
	return nil
}

func oneOf(v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return fmt.Errorf("must be one of %s (got %q)", strings.Join(allowed, ", "), v)
	}
	return nil
}

func nonEmpty(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	return nil
}

func hostPort(v string) error {
	if _, _, err := net.SplitHostPort(v); err != nil {
		return fmt.Errorf("must be host:port (got %q)", v)
	}
	return nil
}

// clientToken never echoes the value: it is a secret.
func clientToken(v string) error {
	if v != "" && len(v) < 32 {
		return fmt.Errorf("must be at least 32 characters (got %d): `openssl rand -hex 24` makes one", len(v))
	}
	if strings.ContainsAny(v, " \t\r\n") {
		return errors.New("must not contain white space")
	}
	return nil
}

// masterKey never echoes the value: it is a secret.
func masterKey(v string) error {
	if v == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return errors.New("must be standard base64 of exactly 32 bytes (value is not valid base64)")
	}
	if len(b) != 32 {
		return fmt.Errorf("must be standard base64 of exactly 32 bytes (got %d bytes)", len(b))
	}
	return nil
}

// baseURL checks an optional absolute http(s) URL with no query.
func baseURL(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("must be an absolute http or https URL such as https://demos.example.com (got %q)", v)
	}
	return nil
}

func rfc3339(v string) error {
	if v == "" {
		return nil
	}
	if _, err := time.Parse(time.RFC3339, v); err != nil {
		return fmt.Errorf("invalid RFC 3339 time %q", v)
	}
	return nil
}
