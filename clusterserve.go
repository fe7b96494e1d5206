package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"log/slog"
	"sync"

	"demosvc/config"
	"demosvc/eventlog"
	"demosvc/eventlog/natslog"
	"demosvc/projections"
)

// openCluster joins the cluster when cluster.enabled is set: it starts the
// embedded NATS server (or connects to cluster.nats_url) and waits until
// the log's stream exists, which on a first start needs the other nodes.
// It returns nil on a single node.
func openCluster(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*natslog.Node, error) {
	if !cfg.Cluster.Enabled {
		return nil, nil
	}
	ncfg := natslog.Config{NATSURL: cfg.Cluster.NATSURL, Replicas: cfg.Cluster.Replicas,
		LeaseTTL: cfg.Cluster.LeaseTTL, Logger: logger}
	var tlsCfg *tls.Config // cluster.tls_*: the embedded server's routes, or the connection to cluster.nats_url
	if cfg.Cluster.TLSCertFile != "" {
		var err error
		if tlsCfg, err = natslog.RouteTLS(cfg.Cluster.TLSCertFile, cfg.Cluster.TLSKeyFile, cfg.Cluster.TLSCAFile); err != nil {
			return nil, err
		}
	}
	if cfg.Cluster.NATSURL != "" {
		ncfg.TLS = tlsCfg
	} else {
		routes, err := cfg.ClusterRoutes()
		if err != nil {
			return nil, err
		}
		routePassword, err := clusterSecret(cfg, "nats routes")
		if err != nil {
			return nil, err
		}
		ncfg.Server = &natslog.ServerConfig{Cluster: cfg.Cluster.Name, Node: cfg.Cluster.NodeName,
			Listen: cfg.Cluster.Listen, Routes: routes, ClientListen: cfg.Cluster.ClientListen,
			ClientToken: cfg.Cluster.ClientToken, RoutePassword: routePassword,
			DataDir: cfg.DataDir, RouteTLS: tlsCfg, Logger: logger}
	}
	logger.Info("joining the cluster", "cluster", cfg.Cluster.Name, "node", cfg.Cluster.NodeName,
		"listen", cfg.Cluster.Listen, "routes", cfg.Cluster.Routes, "nats_url", config.RedactedURLs(cfg.Cluster.NATSURL),
		"tls", tlsCfg != nil)
	return natslog.Open(ctx, ncfg)
}

// clusterSecret derives a secret the nodes of a cluster share, for one
// purpose, from secrets.master_key, which a cluster requires and every
// node has: HMAC-SHA256 of the purpose under the key, base64url. Nothing
// outside the cluster can compute it; nothing in it needs configuring.
func clusterSecret(cfg *config.Config, purpose string) (string, error) {
	key, err := base64.StdEncoding.DecodeString(cfg.Secrets.MasterKey)
	if err != nil || len(key) != eventlog.MasterKeySize {
		return "", errors.New("cluster.enabled needs secrets.master_key, the same on every node")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("demosvc cluster: " + purpose))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// replicator is node as the log's Replicator, or nil (not a typed nil) on
// a single node.
func replicator(node *natslog.Node) eventlog.Replicator {
	if node == nil {
		return nil
	}
	return node
}

// runCluster follows the stream into the state and keeps the leases until
// ctx is done (following stops earlier at an entry this node cannot
// apply); the returned channel closes once both have stopped. While
// this node holds the writer lease it takes writes; while it holds the
// dispatcher lease it runs dispatch.
func runCluster(ctx context.Context, node *natslog.Node, roles natslog.Roles, state *projections.Projections) <-chan struct{} {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		// It returns on ctx, or once an entry cannot be applied here; the
		// node then says so on /readyz (Following) and takes no writes.
		_ = node.Follow(ctx, roles.Log, state.ApplyEntry)
	}()
	go func() {
		defer wg.Done()
		node.Run(ctx, roles)
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}
