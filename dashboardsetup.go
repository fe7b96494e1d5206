package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"demosvc/config"
	"demosvc/delivery"
	demohttp "demosvc/http"
	"demosvc/http/dashboard"
	"demosvc/projections"

	nethttp "net/http"
)

// newDashboard returns the dashboard serve mounts on the API's address,
// or nil when dashboard.enabled is off.
func newDashboard(cfg *config.Config, state *projections.Projections, logger *slog.Logger, clock func() time.Time,
	deliveries *delivery.Dispatcher, health *demohttp.Health, masterKey []byte) nethttp.Handler {
	if !cfg.Dashboard.Enabled {
		return nil
	}
	// The key of the sessions' use cookie, the same on every node of a
	// cluster (they share the master key) and on every start.
	mac := hmac.New(sha256.New, masterKey)
	mac.Write([]byte("demosvc dashboard: session last use"))
	return dashboard.New(dashboard.Deps{State: state, Config: cfg, Logger: logger, Clock: clock, Deliveries: deliveries, Health: health,
		UseKey: mac.Sum(nil)})
}

// dashboardURL is the base of printed dashboard links: dashboard.public_url,
// or the address serve listens on, over HTTPS when serve answers it.
func dashboardURL(cfg *config.Config, listenAddr string) string {
	if cfg.Dashboard.PublicURL != "" {
		return strings.TrimSuffix(cfg.Dashboard.PublicURL, "/")
	}
	if cfg.TLS.CertFile != "" {
		return "https://" + listenAddr
	}
	return "http://" + listenAddr
}

// printFirstAdminLink issues and prints the one-time link where the first
// admin of a new account sets their e-mail and password.
func (c *cli) printFirstAdminLink(cfg *config.Config, state *projections.Projections, acc projections.Account, baseURL string, now time.Time) error {
	if !cfg.Dashboard.Enabled {
		return nil
	}
	link, err := state.IssueSetupLink(c.ctx, "cli", acc.ID, "", now)
	if err != nil {
		return fmt.Errorf("issuing the dashboard setup link: %w", err)
	}
	fmt.Fprintf(c.stdout, "Dashboard: set up its first admin at this one-time link (valid 24 h, until %s):\n%s%s\n",
		link.ExpiresAt, baseURL, link.Path())
	return nil
}
