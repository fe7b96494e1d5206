package http

import (
	"net"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// mountDashboard serves every path the router does not know, outside /v1,
// through the dashboard: /healthz, /readyz, /metrics and /v1 keep their
// own answers. The dashboard sees as RemoteAddr the client that
// http.trusted_proxies, or on a cluster node the node that forwarded the
// request, let the forwarding headers name, for its sign-in limits and
// its session records.
func mountDashboard(r *httprouter.Router, dashboard http.Handler, trusted proxies) {
	apiNotFound := r.NotFound
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if apiPath(req.URL.Path) || req.Method == http.MethodConnect {
			apiNotFound.ServeHTTP(w, req) // the API's error object, not the dashboard's page
			return
		}
		if len(trusted.prefixes) > 0 || trusted.fromNode != nil {
			req = req.Clone(req.Context())
			req.RemoteAddr = net.JoinHostPort(trusted.clientAddr(req), "0")
		}
		route("dashboard", dashboard.ServeHTTP)(w, req)
	})
}
