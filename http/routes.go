package http

import (
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"demosvc/projections"
)

// newRouter returns a router with the routes open to anyone (/healthz,
// /readyz, /metrics) and the answers to an unknown route or method. api
// wraps whatever answers a path under /v1: it authenticates the caller
// first, so that an unauthenticated client learns nothing about routes (or
// refuses while starting).
func newRouter(logger *slog.Logger, metrics *Metrics, ready http.HandlerFunc, api func(http.HandlerFunc) http.HandlerFunc) *router {
	r := &router{Router: httprouter.New()}
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.HandleMethodNotAllowed = true
	underAPI := func(r *http.Request) bool { return apiPath(r.URL.Path) }
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodConnect && !underAPI(req) {
			// No route takes CONNECT, whose target is a host:port; under
			// /v1 the caller is authenticated first, as for any method.
			answerError(logger, w, req, apiError(projections.EInvalid, "", "CONNECT is not served: demosvc is not a proxy"))
			return
		}
		h := func(w http.ResponseWriter, r *http.Request) {
			answerError(logger, w, r, apiError(projections.ENotFound, "", "no route %s %s", r.Method, r.URL.Path))
		}
		if underAPI(req) {
			h = api(h)
		}
		h(w, req)
	})
	// A known route with the wrong method; the router has set Allow, in
	// no fixed order, and always lists OPTIONS, which this API does not
	// serve.
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "*" {
			// The router answers the server-wide target "*" with every
			// method it serves; net/http has already answered OPTIONS *.
			w.Header().Del("Allow")
			answerError(logger, w, req, apiError(projections.EInvalid, "",
				"the request target * names no resource; it is for OPTIONS only"))
			return
		}
		var allow []string
		for _, m := range strings.Split(w.Header().Get("Allow"), ", ") {
			if m != http.MethodOptions && m != "" {
				allow = append(allow, m)
			}
		}
		slices.SortFunc(allow, func(a, b string) int { return methodOrder(a) - methodOrder(b) })
		// Set only once the caller is let in (under /v1, authenticated):
		// a 401 with it would tell which methods a path has.
		w.Header().Del("Allow")
		h := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			answerError(logger, w, r, apiError(EMethodNotAllowed, "",
				"%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, w.Header().Get("Allow")))
		}
		if underAPI(req) {
			h = api(h)
		}
		h(w, req)
	})
	r.handle(http.MethodGet, "/healthz", route("/healthz", handleHealth))
	r.handle(http.MethodGet, "/readyz", route("/readyz", ready))
	r.handle(http.MethodGet, "/metrics", route("/metrics", metrics.handler().ServeHTTP))
	return r
}

// router is the API's router, with the list of what it serves (for the
// test that holds openapi.yaml to it).
type router struct {
	*httprouter.Router
	served []string // "METHOD /path/:param", in the order registered, HEAD left out
}

// handle registers h for method and path, and for HEAD too when method is
// GET: a HEAD is answered as the GET would be, without the body (net/http
// drops it).
func (r *router) handle(method, path string, h http.HandlerFunc) {
	r.served = append(r.served, method+" "+path)
	withParams := func(w http.ResponseWriter, req *http.Request, ps httprouter.Params) {
		w.(*exchange).params = ps
		h(w, req)
	}
	r.Handle(method, path, withParams)
	if method == http.MethodGet {
		r.Handle(http.MethodHead, path, withParams)
	}
}

// apiPath reports whether the path p is the API's, /v1 or under it, as
// written or once cleaned: "//v1/agents" and "/x/../v1/agents" are the
// API's too, answered with its error object rather than handed to the
// dashboard, whose file server would redirect them.
func apiPath(p string) bool {
	if p == "/v1" || strings.HasPrefix(p, "/v1/") {
		return true
	}
	c := path.Clean("/" + p)
	return c == "/v1" || strings.HasPrefix(c, "/v1/")
}

// methodOrder orders the methods of an Allow header.
func methodOrder(m string) int {
	if i := slices.Index([]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}, m); i >= 0 {
		return i
	}
	return 99
}

// routes registers every route of the public API in one place (the open
// ones in newRouter).
func (s *Server) routes() http.Handler {
	r := newRouter(s.deps.Logger, s.deps.Metrics, s.deps.Health.readiness(true), s.authenticated)
	if s.deps.Dashboard != nil {
		mountDashboard(r.Router, s.deps.Dashboard, s.proxies)
	}
	api := func(method, path string, h http.HandlerFunc) {
		r.handle(method, path, route(path, s.authenticated(s.wellFormedQuery(h))))
	}
	// A list parses its query once, in its handler (parseListQuery), which
	// refuses a malformed one as wellFormedQuery does.
	list := func(path string, h http.HandlerFunc) {
		r.handle(http.MethodGet, path, route(path, s.authenticated(h)))
	}

	api(http.MethodGet, "/v1/account", s.handleAccount)

	api(http.MethodPost, "/v1/agents", s.handleCreateAgent)
	list("/v1/agents", s.handleListAgents)
	api(http.MethodGet, "/v1/agents/:id", s.handleGetAgent)
	api(http.MethodPatch, "/v1/agents/:id", s.handleUpdateAgent)

	api(http.MethodPost, "/v1/sessions", s.handleStartSession)
	list("/v1/sessions", s.handleListSessions)
	api(http.MethodGet, "/v1/sessions/:id", s.handleGetSession)
	api(http.MethodPost, "/v1/sessions/:id/progress", s.sessionAction((*projections.Projections).ProgressSession))
	api(http.MethodPost, "/v1/sessions/:id/complete", s.sessionAction((*projections.Projections).CompleteSession))
	api(http.MethodPost, "/v1/sessions/:id/abandon", s.sessionAction((*projections.Projections).AbandonSession))
	api(http.MethodPost, "/v1/sessions/:id/meeting", s.handleBookMeeting)

	list("/v1/contacts", s.handleListContacts)
	api(http.MethodGet, "/v1/contacts/:id", s.handleGetContact)

	api(http.MethodPost, "/v1/webhooks", s.handleRegisterWebhook)
	list("/v1/webhooks", s.handleListWebhooks)
	api(http.MethodGet, "/v1/webhooks/:id", s.handleGetWebhook)
	api(http.MethodDelete, "/v1/webhooks/:id", s.handleDeleteWebhook)
	list("/v1/webhooks/:id/deliveries", s.handleListDeliveries)
	api(http.MethodPost, "/v1/webhooks/:id/deliveries/:delivery_id/retry", s.handleRetryDelivery)
	api(http.MethodPatch, "/v1/webhooks/:id", s.handleUpdateWebhook)
	api(http.MethodPost, "/v1/webhooks/:id/rotate-secret", s.handleRotateSecret)
	api(http.MethodPost, "/v1/webhooks/:id/test", s.handleTestWebhook)
	api(http.MethodPost, "/v1/webhooks/:id/recover", s.redeliver(projections.RedeliverRecover))
	api(http.MethodPost, "/v1/webhooks/:id/replay", s.redeliver(projections.RedeliverReplay))
	api(http.MethodGet, "/v1/webhooks/:id/deliveries/:delivery_id", s.handleGetDelivery)
	return r
}

func handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// AccountView is the body of GET /v1/account.
type AccountView struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Plan               string `json:"plan"`
	RateLimitPerMinute int    `json:"rate_limit_per_minute"`
}

func (s *Server) handleAccount(w http.ResponseWriter, r *http.Request) {
	a := principal(w).Account
	writeJSON(w, http.StatusOK, AccountView{ID: a.ID, Name: a.Name, Plan: a.Plan, RateLimitPerMinute: s.planLimit(a)})
}
