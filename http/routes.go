package http

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// routes registers every route of the public API in one place.
func (s *Server) routes() http.Handler {
	r := httprouter.New()
	r.GET("/healthz", s.handleHealth)
	r.GET("/readyz", s.handleReady)
	return r
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.ready.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
