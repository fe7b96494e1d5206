package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"demosvc/config"
	"demosvc/delivery"
	"demosvc/eventlog"
	"demosvc/eventlog/natslog"
	demohttp "demosvc/http"
	"demosvc/projections"
)

// serveInfoFile names the running server in its data dir, so that a second
// `serve`, and tests, can say which process holds it and where it listens.
const serveInfoFile = "serve.json"

type serveInfo struct {
	PID       int       `json:"pid"`
	Listen    string    `json:"listen"`
	StartedAt time.Time `json:"started_at"`
}

// serve runs the API until ctx is cancelled (SIGINT or SIGTERM), then shuts
// down in order: stop accepting, finish requests in flight, stop the log,
// close Pebble.
func (c *cli) serve(args []string) int {
	// SIGHUP is caught for the whole of serve: it reloads the TLS
	// certificate, and with TLS off is only logged. Left to its default
	// it would end the process at once, without the shutdown SIGTERM
	// gets, and `systemctl reload` sends it.
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	defer signal.Stop(hangups)
	fs, cf := c.flagSet("serve")
	fs.Func("listen", "`address` to listen on (default 127.0.0.1:8080)", nonEmpty(&cf.listen))
	newKey := fs.Bool("new-master-key", false, "start a data dir that has no master.key although its log holds sealed values\n(webhook secrets, dashboard passwords), with a new key: they stay unopened")
	if !c.parse(fs, args, 0) {
		return c.usageExit()
	}
	cfg, err := c.config(cf)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	sink := newLogSink(c.stderr)
	defer sink.Close()
	logger := newLogger(cfg, sink)
	if stop := tuneGC(logger); stop != nil {
		defer stop()
	}
	access := demohttp.NewAccessLog(sink.Batched(), cfg.Log.Format, logLevel(cfg))
	if err := c.runServer(cfg, logger, access, hangups, *newKey); err != nil {
		return c.fail(cf, "%v", err)
	}
	return exitOK
}

// runServer serves until a signal; requests log their line to access; it
// answers the SIGHUPs on hangups until it returns.
// A data dir without master.key and without secrets.master_key gets a new
// key, kept once the state shows that its log holds nothing sealed (a new
// data dir, or an import of a log without secrets); a log that does hold
// sealed values (a restore without its master.key) is refused unless
// newMasterKey says to go on without them.
func (c *cli) runServer(cfg *config.Config, logger *slog.Logger, access *demohttp.AccessLog, hangups <-chan os.Signal, newMasterKey bool) error {
	if err := demohttp.CheckSocketPath(cfg.DataDir); err != nil {
		return err
	}
	if err := checkOwner(cfg.DataDir, false); err != nil {
		return err
	}
	store, err := eventlog.OpenStore(cfg.DataDir, eventlog.StoreOptions{Create: true, Logger: logger})
	if err != nil {
		return errors.New(openError(cfg.DataDir, err))
	}
	defer store.Close()
	ids := newIDs(cfg)
	if cfg.Testing.Seed != 0 || cfg.Testing.Clock != "" {
		logger.Warn("testing.seed or testing.clock is set: ids, secrets or time are deterministic; never use this in production")
	}
	masterKey, freshKey, err := eventlog.ReadMasterKey(cfg.DataDir, cfg.Secrets.MasterKey, ids.Reader())
	if err != nil {
		return err
	}
	keyFile := filepath.Join(cfg.DataDir, eventlog.MasterKeyFile)
	if onDisk, err := os.ReadFile(keyFile); err == nil && cfg.Secrets.MasterKey != "" && !bytes.Equal(onDisk, masterKey) {
		logger.Warn("secrets.master_key is set and overrides "+keyFile+", which holds another key: "+
			"what was sealed under the file's key (webhook secrets, dashboard passwords) does not open; unset secrets.master_key to use the file",
			"master_key_file", keyFile)
	}
	sealer, err := eventlog.NewSealer(masterKey, ids.Reader())
	if err != nil {
		return err
	}
	node, err := openCluster(c.ctx, cfg, logger)
	if err != nil {
		return err
	}
	if node != nil {
		defer node.Close()
	}
	var log *eventlog.Log
	metrics := demohttp.NewMetrics(func() float64 { return float64(log.DurableSeq()) })
	log, err = eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: ids, OnCommit: metrics.ObserveCommit,
		Replicator: replicator(node)})
	if err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	defer log.Close()
	if node != nil && log.ReplPos() == 0 && log.DurableSeq() > 0 {
		// Records that no entry of the cluster's stream carries: the
		// other nodes would never hold them, and the first write would
		// stop them following.
		return fmt.Errorf("data dir %s holds a log of %d records written by a single node, not through a cluster: "+
			"a cluster node starts from an empty data dir (turning a single node into a cluster is not supported); "+
			"start this node on a new data dir, or without cluster.enabled", cfg.DataDir, log.DurableSeq())
	}
	reseedAfterOpen(cfg, ids, log)

	// Listen before rebuilding the state, so that /healthz answers and
	// /readyz says 503 while the log replays; the API server, built with
	// every dependency once they exist, then takes the address over.
	stopping := make(chan struct{})
	health := demohttp.NewHealth(log, stopping)
	metrics.Registry.MustRegister(health.Collectors()...)
	addr := demohttp.NewSwitch(demohttp.NewStarting(logger, metrics, health))
	apiLn, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	// Client connections share the open-file limit with Pebble's files,
	// the webhooks' connections and the admin socket: without a bound, idle
	// connections nobody authenticates could take every file handle, and
	// Pebble could then create no table. At the bound, new connections
	// wait in the kernel's backlog to be accepted.
	maxConns := maxConnections(cfg.HTTP.MaxConnections)
	unlimited, _ := cfg.TrustedProxyPrefixes() // validated by config
	unlimited = append(unlimited, clusterPeers(cfg, logger)...)
	apiLn = netutil.LimitListener(demohttp.LimitPerClient(apiLn, cfg.HTTP.MaxPerClient, unlimited, logger), maxConns)
	infoPath := filepath.Join(cfg.DataDir, serveInfoFile)
	if err := writeServeInfo(infoPath, apiLn.Addr().String()); err != nil {
		apiLn.Close()
		return err
	}
	defer os.Remove(infoPath)
	apiSrv := &http.Server{
		Handler:           addr,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    cfg.HTTP.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2)
	var cert *certificate
	if cfg.TLS.CertFile != "" {
		cert, err = loadCertificate(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			apiLn.Close()
			return err
		}
		logger.Info("TLS certificate loaded", "cert_file", cfg.TLS.CertFile, "not_after", cert.notAfter().UTC().Format(time.RFC3339))
		apiSrv.TLSConfig = cert.tlsConfig()
		go func() { errc <- apiSrv.ServeTLS(apiLn, "", "") }()
	} else {
		// net/http's own plain-text answers (431, 400, …) become JSON
		// error objects. Over TLS they stay as net/http writes them: the
		// wrapper would see only ciphertext.
		go func() { errc <- apiSrv.Serve(demohttp.JSONErrorListener(apiLn)) }()
	}
	hangupsDone := make(chan struct{})
	defer close(hangupsDone)
	go onHangup(logger, hangups, hangupsDone, cert)
	logger.Info("listening; rebuilding state", "listen", apiLn.Addr().String(), "tls", cfg.TLS.CertFile != "",
		"max_connections", maxConns, "head_seq", log.DurableSeq())

	opts := projectionOptions(cfg, sealer, logger)
	opts.Stop = c.ctx.Done() // a signal during a long replay stops serve now, not after it
	state, err := projections.Open(log, opts)
	if errors.Is(err, projections.ErrStopped) {
		apiSrv.Close()
		logger.Info("stopped while rebuilding the state", "head_seq", log.DurableSeq())
		return nil
	}
	if err != nil {
		apiSrv.Close()
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	defer state.Close()
	if freshKey {
		if n := state.SealedValues(); n > 0 && !newMasterKey {
			apiSrv.Close()
			state.CloseWithoutSnapshot() // neither a key nor a snapshot: the data dir as it was
			return fmt.Errorf("data dir %s has no %s, and its log holds %d sealed values (webhook signing secrets, dashboard passwords) "+
				"that open only under the master key they were sealed with: copy that master.key into the data dir, or set secrets.master_key to it; "+
				"to start without them under a new key (their webhooks disabled, each user given a new password with `demosvc users reset-password`), "+
				"run serve --new-master-key", cfg.DataDir, keyFile, n)
		}
		if err := eventlog.SaveMasterKey(cfg.DataDir, masterKey); err != nil {
			apiSrv.Close()
			return err
		}
	}
	info := state.LoadInfo()
	logger.Info("state rebuilt", "snapshot_seq", info.SnapshotSeq, "replayed", info.Replayed,
		"took", info.Took, "snapshot_ignored", info.Ignored)
	// The chain is checked in the background from seq 1, once the rebuild
	// no longer needs the CPU: damage that a start from a snapshot never
	// reads is still found.
	verifyCtx, stopVerify := context.WithCancel(context.Background())
	defer stopVerify()
	go health.Verify(verifyCtx, logger)
	marked := make(chan struct{})
	go func() {
		defer close(marked)
		log.KeepHeadMarked(verifyCtx, eventlog.HeadMarkInterval, func(err error) {
			logger.Warn("recording the head mark", "err", err)
		})
	}()
	defer func() { stopVerify(); <-marked }() // no mark half written as the log closes
	if ids := state.UnavailableSecrets(); len(ids) > 0 {
		logger.Warn("webhooks whose signing secret does not open under this data dir's master key get no deliveries "+
			"and show status disabled (secret_unavailable): bring the master.key they were sealed with, or set secrets.master_key",
			"webhook_ids", ids)
	}
	if ids := state.UnavailablePasswords(); len(ids) > 0 {
		logger.Warn("dashboard users whose password does not open under this data dir's master key cannot sign in: "+
			"bring the master.key they were sealed with, or set secrets.master_key (a password set meanwhile would then not open), "+
			"or give each a new password with `demosvc users reset-password USER_ID`",
			"user_ids", ids)
	}
	if node == nil {
		if err := c.bootstrap(cfg, state, logger, dashboardURL(cfg, apiLn.Addr().String()), ids.Now()); err != nil {
			apiSrv.Close()
			return err
		}
	}
	deliveries := delivery.New(log, state, delivery.Config{
		Timeout: cfg.Delivery.Timeout, MaxRetries: cfg.Delivery.MaxRetries, Backoff: cfg.Delivery.Backoff,
		BackoffFactor: cfg.Delivery.BackoffFactor, Concurrency: cfg.Delivery.Concurrency,
		AllowPrivate: cfg.Delivery.AllowPrivateNetworks, StandardWebhooks: cfg.Delivery.StandardWebhooks,
		UserAgent: "demosvc/" + version, Clock: delivery.SystemClock{},
		PerWebhookMetrics: cfg.Metrics.PerWebhook,
		DisableAfter:      cfg.Delivery.DisableAfter, Retention: cfg.Delivery.Retention,
	}, logger)
	deliveryCtx, cancelDeliveries := context.WithCancel(context.Background())
	var deliveriesDone <-chan struct{}
	if node == nil {
		done := make(chan struct{})
		go func() { deliveries.Run(deliveryCtx); close(done) }()
		deliveriesDone = done
	} else {
		// In a cluster deliveries run on the holder of the dispatcher
		// lease; the first writer of an empty log bootstraps it.
		deliveriesDone = runCluster(deliveryCtx, node, natslog.Roles{
			Node: cfg.Cluster.NodeName, Addr: advertised(cfg, apiLn.Addr()), Log: log,
			Prepare:  state.ReloadIdempotency,
			Dispatch: deliveries.Run,
			Became: func() {
				if err := c.bootstrap(cfg, state, logger, dashboardURL(cfg, apiLn.Addr().String()), ids.Now()); err != nil {
					logger.Error("creating the default account", "err", err)
				}
			},
		}, state)
		health.ClusterStatus(node)
		metrics.Registry.MustRegister(demohttp.ClusterCollectors(node, log)...)
	}
	var stopOnce sync.Once
	stopDeliveries := func() { stopOnce.Do(func() { cancelDeliveries(); <-deliveriesDone }) }
	defer stopDeliveries()
	metrics.Registry.MustRegister(deliveries.Collectors()...)

	adminLn, err := demohttp.ListenAdmin(cfg.DataDir)
	if err != nil {
		apiSrv.Close()
		return err
	}
	defer os.Remove(demohttp.SocketPath(cfg.DataDir))
	admin := &demohttp.Admin{Log: log, State: state, Config: cfg, DashboardURL: dashboardURL(cfg, apiLn.Addr().String()), Clock: ids.Now}
	if node != nil {
		admin.Cluster = func(ctx context.Context) any { return node.Status(ctx, cfg.Cluster.NodeName, log) }
		admin.WriterAddr = node.WriterAddr
	}
	adminSrv := &http.Server{Handler: admin.Handler(), ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout}
	go func() { errc <- adminSrv.Serve(adminLn) }()
	var cluster *demohttp.ClusterOptions
	if node != nil {
		scheme := "http"
		if cfg.TLS.CertFile != "" {
			scheme = "https"
		}
		secret, err := clusterSecret(cfg, "forwarded writes")
		if err != nil {
			apiSrv.Close()
			return err
		}
		cluster = &demohttp.ClusterOptions{Node: node, Log: log, NodeName: cfg.Cluster.NodeName,
			Scheme: scheme, ReadWait: cfg.Cluster.ReadWait, ForwardTimeout: cfg.HTTP.WriteTimeout / 2, Logger: logger,
			Secret: []byte(secret)}
	}
	api := demohttp.NewServer(demohttp.Deps{Log: log, State: state, Config: cfg, Logger: logger, AccessLog: access, Metrics: metrics,
		Deliveries: deliveries, Clock: ids.Now, Stopping: stopping, Health: health,
		Dashboard: newDashboard(cfg, state, logger, ids.Now, deliveries, health, masterKey), Cluster: cluster})
	if node != nil {
		// Ready once this node holds what the cluster held when it came
		// up: a load balancer then never sends a read to a node far behind.
		if err := node.CatchUp(c.ctx, log); err != nil {
			apiSrv.Close()
			return fmt.Errorf("catching up with the cluster's log: %w", err)
		}
	}
	addr.To(api)
	logger.Info("serving", "listen", apiLn.Addr().String(), "data_dir", cfg.DataDir,
		"head_seq", log.DurableSeq(), "version", version)

	var serveErr error
	select {
	case <-c.ctx.Done():
		logger.Info("shutting down")
	case serveErr = <-errc:
		logger.Error("server stopped", "err", serveErr)
	}
	close(stopping)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if err := apiSrv.Shutdown(ctx); err != nil {
		logger.Warn("api shutdown", "err", err)
	}
	// Deliveries finish their attempts in flight while the log and the
	// state still take writes (a 410 records webhook.disabled).
	stopDeliveries()
	// No head mark is being written as the log writes its own at close
	// (an older one landing after it would name an earlier head).
	stopVerify()
	<-marked
	// Closing the log ends `log --follow` streams, so the admin server can
	// then drain.
	log.Close()
	if err := adminSrv.Shutdown(ctx); err != nil {
		logger.Warn("admin shutdown", "err", err)
	}
	logger.Info("stopped", "head_seq", log.DurableSeq())
	return serveErr
}

// projectionOptions are the settings commands are decided with.
func projectionOptions(cfg *config.Config, sealer *eventlog.Sealer, logger *slog.Logger) projections.Options {
	return projections.Options{
		HotThreshold:         cfg.Leads.HotThreshold,
		SnapshotEvery:        cfg.Snapshot.Every,
		Logger:               logger,
		Sealer:               sealer,
		MaxWebhooks:          cfg.Webhooks.MaxPerAccount,
		AllowPrivateNetworks: cfg.Delivery.AllowPrivateNetworks,
		ReplayProgress:       replayProgressOf(logger),
	}
}

// bootstrap creates account "default" and its first key when the log has
// no account, and prints the key once, with the one-time link where the
// account's first admin sets up the dashboard.
func (c *cli) bootstrap(cfg *config.Config, state *projections.Projections, logger *slog.Logger, baseURL string, now time.Time) error {
	acc, key, created, err := state.Bootstrap(c.ctx, cfg.Bootstrap.Plan)
	if err != nil {
		return fmt.Errorf("creating the default account: %w", err)
	}
	if !created {
		return nil
	}
	logger.Info("created the default account", "account_id", acc.ID, "plan", acc.Plan, "key_id", key.ID)
	fmt.Fprintf(c.stdout, "Created account %q (%s, plan %s) and its API key.\n", acc.Name, acc.ID, acc.Plan)
	if _, err := fmt.Fprintf(c.stdout, "API key (shown once; it will not be shown again, store it now):\n%s\n", key.Key); err != nil {
		logger.Error("the default account's API key could not be printed: revoke it and create another with `demosvc keys create`",
			"key_id", key.ID, "err", err)
	}
	return c.printFirstAdminLink(cfg, state, acc, baseURL, now)
}

// writeServeInfo writes serve.json atomically.
func writeServeInfo(path, listen string) error {
	b, err := json.Marshal(serveInfo{PID: os.Getpid(), Listen: listen, StartedAt: time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// newLogger builds the structured logger of log.level and log.format.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevel(cfg)}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logLevel is the log.level key's level (validated by config).
func logLevel(cfg *config.Config) slog.Level {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	return level
}

// advertised is the address the other nodes of a cluster forward writes
// to: cluster.advertise, else the address the API listens on (which
// config refuses when it binds every address).
func advertised(cfg *config.Config, listening net.Addr) string {
	if cfg.Cluster.Advertise != "" {
		return cfg.Cluster.Advertise
	}
	return listening.String()
}

// maxConnections is http.max_connections, or when it is 0 half the
// process's open-file limit (at least 32), which leaves the other half to
// the store, the webhooks' connections and the cluster.
func maxConnections(configured int) int {
	if configured > 0 {
		return configured
	}
	n := 1024 // when the limit cannot be read
	if lim, ok := openFileLimit(); ok && lim < 1<<30 {
		n = int(lim)
	}
	return max(32, n/2)
}

// clusterPeers returns the addresses of the hosts in cluster.routes, the
// cluster's nodes, which forward writes to the writer over many
// connections: they are not held to http.max_connections_per_client. A
// name that does not resolve at start is left out, with a warning.
func clusterPeers(cfg *config.Config, logger *slog.Logger) []netip.Prefix {
	if !cfg.Cluster.Enabled || cfg.HTTP.MaxPerClient == 0 {
		return nil
	}
	var out []netip.Prefix
	for _, route := range strings.Split(cfg.Cluster.Routes, ",") {
		host, _, err := net.SplitHostPort(strings.TrimSpace(route))
		if err != nil || host == "" {
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		cancel()
		if err != nil {
			logger.Warn("a host of cluster.routes does not resolve: its node's forwarded writes count against http.max_connections_per_client",
				"host", host, "err", err)
			continue
		}
		for _, ip := range ips {
			out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
		}
	}
	return out
}
