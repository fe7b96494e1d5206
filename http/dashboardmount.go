package http

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// mountDashboard serves every path the router does not know, outside /v1,
// through the dashboard: /healthz, /readyz, /metrics and /v1 keep their
// own answers.
func mountDashboard(r *httprouter.Router, dashboard http.Handler) {
	apiNotFound := r.NotFound
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p := req.URL.Path
		if p == "/v1" || strings.HasPrefix(p, "/v1/") {
			apiNotFound.ServeHTTP(w, req)
			return
		}
		route("dashboard", dashboard.ServeHTTP)(w, req)
	})
}
