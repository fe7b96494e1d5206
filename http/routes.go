package http

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"demosvc/projections"
)

// routes registers every route of the public API in one place.
func (s *Server) routes() http.Handler {
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(s.notFound)
	r.MethodNotAllowed = http.HandlerFunc(s.methodNotAllowed)

	open := func(method, path string, h http.HandlerFunc) { r.Handler(method, path, route(path, h)) }
	api := func(method, path string, h http.HandlerFunc) {
		r.Handler(method, path, route(path, s.authenticated(h)))
	}

	open(http.MethodGet, "/healthz", s.handleHealth)
	open(http.MethodGet, "/readyz", s.handleReady)
	open(http.MethodGet, "/metrics", s.deps.Metrics.handler().ServeHTTP)

	api(http.MethodGet, "/v1/account", s.handleAccount)

	api(http.MethodPost, "/v1/agents", s.handleCreateAgent)
	api(http.MethodGet, "/v1/agents", s.handleListAgents)
	api(http.MethodGet, "/v1/agents/:id", s.handleGetAgent)
	api(http.MethodPatch, "/v1/agents/:id", s.handleUpdateAgent)

	api(http.MethodPost, "/v1/sessions", s.handleStartSession)
	api(http.MethodGet, "/v1/sessions", s.handleListSessions)
	api(http.MethodGet, "/v1/sessions/:id", s.handleGetSession)
	api(http.MethodPost, "/v1/sessions/:id/progress", s.sessionAction((*projections.Projections).ProgressSession))
	api(http.MethodPost, "/v1/sessions/:id/complete", s.sessionAction((*projections.Projections).CompleteSession))
	api(http.MethodPost, "/v1/sessions/:id/abandon", s.sessionAction((*projections.Projections).AbandonSession))
	api(http.MethodPost, "/v1/sessions/:id/meeting", s.handleBookMeeting)

	api(http.MethodGet, "/v1/contacts", s.handleListContacts)
	api(http.MethodGet, "/v1/contacts/:id", s.handleGetContact)

	api(http.MethodPost, "/v1/webhooks", s.handleRegisterWebhook)
	api(http.MethodGet, "/v1/webhooks", s.handleListWebhooks)
	api(http.MethodGet, "/v1/webhooks/:id", s.handleGetWebhook)
	api(http.MethodDelete, "/v1/webhooks/:id", s.handleDeleteWebhook)
	api(http.MethodGet, "/v1/webhooks/:id/deliveries", s.handleListDeliveries)
	api(http.MethodPost, "/v1/webhooks/:id/deliveries/:delivery_id/retry", s.handleRetryDelivery)
	return r
}

// notFound answers an unknown route. Under /v1 the caller is authenticated
// first, so that an unauthenticated client learns nothing about routes.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	h := func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(projections.ENotFound, "no route %s %s", r.Method, r.URL.Path))
	}
	if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1" {
		h = s.authenticated(h)
	}
	h(w, r)
}

// methodNotAllowed answers a known route with the wrong method; the router
// has set Allow.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	// httprouter always lists OPTIONS, which this API does not serve.
	var allow []string
	for _, m := range strings.Split(w.Header().Get("Allow"), ", ") {
		if m != http.MethodOptions && m != "" {
			allow = append(allow, m)
		}
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	h := func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(EMethodNotAllowed,
			"%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, w.Header().Get("Allow")))
	}
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		h = s.authenticated(h)
	}
	h(w, r)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.stopping.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "stopping"})
		return
	}
	if !s.ready.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// AccountView is the body of GET /v1/account.
type AccountView struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Plan               string `json:"plan"`
	RateLimitPerMinute int    `json:"rate_limit_per_minute"`
}

func (s *Server) handleAccount(w http.ResponseWriter, r *http.Request) {
	a := principal(r).Account
	writeJSON(w, http.StatusOK, AccountView{ID: a.ID, Name: a.Name, Plan: a.Plan, RateLimitPerMinute: s.planLimit(a)})
}
