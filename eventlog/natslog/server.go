// Package natslog is the clustered backend of the event log: a JetStream
// stream, replicated by NATS's RAFT, is the log of record, and each
// demosvc node keeps a copy of it in its own Pebble store (see
// eventlog/replica.go). A node runs one embedded nats-server (JetStream,
// file store under the data dir, every write fsynced) or connects to an
// external NATS cluster; leases in a JetStream key-value bucket elect the
// one writer and the one webhook dispatcher.
package natslog

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerDir is the directory inside the data dir holding the embedded
// nats-server's JetStream files.
const ServerDir = "nats"

// RandomToken is a client token no one outside this process knows.
func RandomToken() string { return rand.Text() }

// RouteUser is the user every route between the nodes' servers
// authenticates as, with ServerConfig.RoutePassword.
const RouteUser = "demosvc"

// maxPayload is the largest message the embedded server takes: one entry
// is one group commit, which may carry many commands.
const maxPayload = 8 << 20

// ServerConfig describes the embedded nats-server of one node.
type ServerConfig struct {
	Cluster string   // cluster name, the same on every node
	Node    string   // this node's name, unique in the cluster
	Listen  string   // host:port the cluster routes listen on
	Routes  []string // host:port of every node's route listener (this one may be among them)
	// ClientListen, if set, is the host:port of a listener for NATS
	// clients such as the nats CLI. Empty (the default): a port of
	// 127.0.0.1 the system picks (nats-server routes only with a client
	// listener). Every client, this node's own in-process connection too,
	// must present ClientToken; left empty, it is random, and no client
	// from outside can present it.
	ClientListen string
	ClientToken  string
	// RoutePassword is what every route must present (user RouteUser),
	// required with Routes: a server that does not know it cannot join
	// the cluster, whether the routes are TLS or not. serve derives it
	// from the master key, which every node shares.
	RoutePassword string
	DataDir       string // the node's data dir; JetStream files go under ServerDir in it
	// RouteTLS, if set, makes every route mutual TLS (RouteTLS builds it
	// from cluster.tls_*): a node accepts a route only from a peer whose
	// certificate chains to the CA, and dials only peers whose certificate
	// does and names the address it dialled.
	RouteTLS *tls.Config
	Logger   *slog.Logger
}

// RouteTLS returns the mutual TLS configuration of the embedded server's
// routes, or of the connection to an external NATS cluster: this node's
// certificate and key, and the CA certificates a peer's must chain to, as
// server and as client.
func RouteTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_cert_file, cluster.tls_key_file: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster.tls_ca_file: %s holds no PEM certificate", caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

// StartServer starts the embedded nats-server and waits until it takes
// connections. Every JetStream write is fsynced before it is acknowledged
// (sync_interval: always): with the default lazy flush, NATS's own Jepsen
// analysis found acknowledged writes lost on a crash.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	host, port, err := splitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster.listen: %w", err)
	}
	routes := make([]*url.URL, 0, len(cfg.Routes))
	for _, r := range cfg.Routes {
		u := &url.URL{Scheme: "nats", Host: r}
		if cfg.RoutePassword != "" {
			u.User = url.UserPassword(RouteUser, cfg.RoutePassword)
		}
		routes = append(routes, u)
	}
	opts := &server.Options{
		ServerName:   cfg.Node,
		MaxPayload:   maxPayload,
		JetStream:    true,
		StoreDir:     filepath.Join(cfg.DataDir, ServerDir),
		SyncAlways:   true,
		SyncInterval: 2 * time.Minute, // what `sync_interval: always` sets beside SyncAlways
		NoSigs:       true,
	}
	// The server carries the whole log and the leases that say which node
	// takes writes: no client goes unauthenticated.
	opts.Host, opts.Port, opts.Authorization = "127.0.0.1", server.RANDOM_PORT, cfg.ClientToken
	if cfg.ClientListen != "" {
		if cfg.ClientToken == "" {
			return nil, errors.New("cluster.client_listen needs cluster.client_token: the NATS server carries the whole log and its leases")
		}
		if opts.Host, opts.Port, err = splitHostPort(cfg.ClientListen); err != nil {
			return nil, fmt.Errorf("cluster.client_listen: %w", err)
		}
	} else if opts.Authorization == "" {
		opts.Authorization = RandomToken()
	}
	if len(routes) > 0 {
		// Without routes the server runs JetStream on its own: a cluster
		// of one (replicas 1), for trying things out; it cannot grow later.
		if cfg.RoutePassword == "" {
			return nil, errors.New("nats-server: routes need a password: a server that could join without one would read the whole log")
		}
		opts.Cluster = server.ClusterOpts{Name: cfg.Cluster, Host: host, Port: port,
			Username: RouteUser, Password: cfg.RoutePassword}
		if cfg.RouteTLS != nil {
			opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = cfg.RouteTLS, 5 // seconds
		}
		opts.Routes = routes
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv.SetLoggerV2(serverLogger{logger.With("component", "nats")}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats-server: not ready for connections after 30s")
	}
	return srv, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}

// serverLogger sends nats-server's messages to slog: notices at debug
// level (it is chatty while a cluster forms), warnings and errors as such.
type serverLogger struct{ l *slog.Logger }

func (s serverLogger) Noticef(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s serverLogger) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s serverLogger) Fatalf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s serverLogger) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.HasPrefix(msg, "Error trying to connect to route") {
		// Every second while a peer is down: expected, and `demosvc
		// cluster status` tells the story better.
		s.l.Debug(msg)
		return
	}
	s.l.Error(msg)
}
func (s serverLogger) Debugf(format string, v ...any) {}
func (s serverLogger) Tracef(format string, v ...any) {}
