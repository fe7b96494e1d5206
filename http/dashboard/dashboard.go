// Package dashboard is demosvc's web dashboard: server-rendered pages
// (html/template, assets embedded) that work without JavaScript, served on
// the API's address. It is transport only: every change is a call to the
// same projections command the API and the CLI use, with the signed-in
// user's id as the actor.
package dashboard

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"demosvc/config"
	"demosvc/delivery"
	demohttp "demosvc/http"
	"demosvc/projections"
)

// Deps is everything the dashboard needs.
type Deps struct {
	State  *projections.Projections // required
	Config *config.Config           // required
	Logger *slog.Logger             // nil discards
	Clock  func() time.Time         // nil means time.Now
	// Deliveries answers the webhooks' attempt logs and retries; nil: the
	// webhook pages say deliveries are not available.
	Deliveries *delivery.Dispatcher
	// Health tells the audit page how far the log's chain is verified;
	// nil: the status line says it is not known.
	Health *demohttp.Health
	// UseKey signs the cookie that tells when a session was last used
	// (derived from the master key, so every node of a cluster shares it):
	// a node that did not see a session's last use takes it from the
	// cookie, where the idle timeout would otherwise count from sign-in.
	// nil: each node goes by the uses it saw.
	UseKey []byte
}

// Dashboard is the dashboard's http.Handler. Every route runs behind
// http.CrossOriginProtection (a cross-origin POST is refused with 403),
// with a CSP that allows no inline script, and changes state on POST only.
type Dashboard struct {
	deps     Deps
	sessions *Sessions
	byAddr   *demohttp.Limiters // sign-in attempts per client address
	byEmail  *demohttp.Limiters // sign-in attempts per e-mail
	pages    *pages
	handler  http.Handler
}

// maxSignInKeys bounds the addresses and e-mails whose attempts are counted.
const maxSignInKeys = 100_000

// New returns the dashboard.
func New(d Deps) *Dashboard {
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	db := &Dashboard{
		deps:     d,
		sessions: NewSessions(d.State, d.Clock, d.Config.Dashboard.SessionIdle, d.Config.Dashboard.SessionMax),
		byAddr:   demohttp.NewLimiters(d.Clock, maxSignInKeys),
		byEmail:  demohttp.NewLimiters(d.Clock, maxSignInKeys),
		pages:    loadPages(),
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		db.errorPage(w, r, http.StatusForbidden, "This request came from another site and was refused.")
	}))
	db.handler = securityHeaders(cop.Handler(db.routes()))
	return db
}

// ServeHTTP serves the dashboard.
func (db *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { db.handler.ServeHTTP(w, r) }

// routes registers every dashboard route in one place: the URL map is a
// contract (README, "Dashboard").
func (db *Dashboard) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /assets/", assetHandler())

	mux.HandleFunc("GET /login", db.handleLoginForm)
	mux.HandleFunc("POST /login", db.handleLogin)
	mux.HandleFunc("POST /logout", db.handleLogout)
	mux.HandleFunc("GET /setup/{token}", db.handleSetupForm)
	mux.HandleFunc("POST /setup/{token}", db.handleSetup)

	signed := func(pattern string, h func(http.ResponseWriter, *http.Request, *caller)) {
		mux.HandleFunc(pattern, db.signedIn(h, false))
	}
	admin := func(pattern string, h func(http.ResponseWriter, *http.Request, *caller)) {
		mux.HandleFunc(pattern, db.signedIn(h, true))
	}
	signed("GET /{$}", db.handleOverview)
	signed("GET /sessions", db.handleSessions)
	signed("GET /sessions/{id}", db.handleSession)
	signed("GET /contacts", db.handleContacts)
	signed("GET /contacts/{id}", db.handleContact)
	signed("GET /webhooks", db.handleWebhooks)
	admin("GET /webhooks/new", db.handleNewWebhookForm)
	admin("POST /webhooks", db.handleCreateWebhook)
	signed("GET /webhooks/{id}", db.handleWebhook)
	admin("GET /webhooks/{id}/delete", db.handleDeleteWebhookForm)
	admin("POST /webhooks/{id}/delete", db.handleDeleteWebhook)
	admin("POST /webhooks/{id}/deliveries/{dlv}/retry", db.handleRetryDelivery)
	admin("POST /webhooks/{id}/status", db.handleWebhookStatus)
	admin("GET /webhooks/{id}/edit", db.handleEditWebhookForm)
	admin("POST /webhooks/{id}/edit", db.handleEditWebhook)
	admin("POST /webhooks/{id}/rotate-secret", db.handleRotateSecret)
	admin("POST /webhooks/{id}/test", db.handleTestWebhook)
	admin("POST /webhooks/{id}/recover", db.handleRedeliver(projections.RedeliverRecover))
	admin("POST /webhooks/{id}/replay", db.handleRedeliver(projections.RedeliverReplay))
	admin("GET /audit", db.handleAudit)
	admin("GET /audit/export", db.handleAuditExport)

	signed("GET /agents", db.handleAgents)
	admin("GET /agents/new", db.handleNewAgentForm)
	admin("POST /agents", db.handleCreateAgent)
	signed("GET /agents/{id}", db.handleAgent)
	admin("POST /agents/{id}", db.handleUpdateAgent)
	admin("POST /agents/{id}/status", db.handleAgentStatus)

	signed("GET /settings", db.handleSettings)
	signed("GET /settings/account", db.handleAccount)
	signed("GET /settings/api-keys", db.handleKeys)
	admin("POST /settings/api-keys", db.handleCreateKey)
	admin("GET /settings/api-keys/{id}/revoke", db.handleRevokeKeyForm)
	admin("POST /settings/api-keys/{id}/revoke", db.handleRevokeKey)
	admin("GET /settings/users", db.handleUsers)
	admin("POST /settings/users", db.handleInviteUser)
	admin("GET /settings/users/{id}/disable", db.handleDisableUserForm)
	admin("POST /settings/users/{id}/disable", db.handleDisableUser)

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		db.errorPage(w, r, http.StatusNotFound, "There is no page here.")
	})
	return mux
}

// maxFormBytes bounds a dashboard request's body.
const maxFormBytes = 256 << 10

// csp allows nothing but this origin's own files: no inline script or
// style, no framing, forms posting only here.
const csp = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"

// securityHeaders sets the headers of every dashboard answer, and bounds
// its body. Pages are
// never stored by a cache: several show a secret once, and all show an
// account's data.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		// The largest form is an agent's (a 32 KiB persona); a bigger body
		// is cut off and its fields read as missing.
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		next.ServeHTTP(w, r)
	})
}

// caller is the signed-in user of a request.
type caller struct {
	User    projections.User
	Account projections.Account
	token   string
}

// principal is who the caller acts as in projections commands: the
// user's id is the actor of every event they cause.
func (c *caller) principal() projections.Principal {
	return projections.Principal{Account: c.Account, KeyID: c.User.ID}
}

func (c *caller) isAdmin() bool { return c.User.Role == projections.RoleAdmin }

// signedIn runs h for a request with a live session; without one, a GET
// goes to /login and comes back after, anything else to /login. adminOnly
// routes answer a viewer with a 403 page.
func (db *Dashboard) signedIn(h func(http.ResponseWriter, *http.Request, *caller), adminOnly bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := db.caller(r)
		if ok {
			db.setUseCookie(w, r, c.token)
		}
		if !ok {
			target := "/login"
			if r.Method == http.MethodGet && r.URL.Path != "/" {
				target += "?next=" + urlQueryEscape(r.URL.RequestURI())
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		if adminOnly && !c.isAdmin() {
			db.errorPage(w, r, http.StatusForbidden, "Your role is viewer: you can look, not change. Ask an admin.")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)), c)
	}
}

type callerKey struct{}

func (db *Dashboard) caller(r *http.Request) (*caller, bool) {
	ck, err := r.Cookie(db.cookieName(r))
	if err != nil {
		return nil, false
	}
	info, ok := db.sessions.Lookup(ck.Value, db.lastUse(r, ck.Value))
	if !ok {
		return nil, false
	}
	acc, ok := db.deps.State.AccountByID(info.User.AccountID)
	if !ok {
		return nil, false
	}
	return &caller{User: info.User, Account: acc, token: ck.Value}, true
}

// callerOf returns the signed-in user a page is rendered for, if any.
func callerOf(r *http.Request) *caller {
	c, _ := r.Context().Value(callerKey{}).(*caller)
	return c
}
