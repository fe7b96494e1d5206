package http

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"demosvc/projections"
)

// BenchmarkServeInProcess measures the server's own cost per request,
// without a network: what the stack adds to a bare handler.
func BenchmarkServeInProcess(b *testing.B) {
	ts := newTestServerTB(b, nil)
	ts.deps.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	acc, _ := ts.state.CreateAccount(b.Context(), "cli", "B", projections.PlanEnterprise, 0)
	key, _ := ts.state.CreateKey(b.Context(), "cli", acc.ID)
	req := httptest.NewRequest("GET", "/v1/account", nil)
	req.Header.Set("Authorization", "Bearer "+key.Key)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		ts.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// discardWriter is a ResponseWriter that keeps the header map and drops
// the rest: a request's cost with no network and no recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkGetSessionInProcess measures what demosvc's own code costs a
// GET /v1/sessions/{id} (access line, metrics, request id, router,
// authentication, rendering), with serve's access line (text, at info)
// but no network, against a bare handler writing the same bytes: the part of
// the black-box gap (.ci/compare-reads) that is the stack's own code.
func BenchmarkGetSessionInProcess(b *testing.B) {
	ts := newTestServerTB(b, nil)
	acc, _ := ts.state.CreateAccount(b.Context(), "cli", "B", projections.PlanEnterprise, 0)
	key, _ := ts.state.CreateKey(b.Context(), "cli", acc.ID)
	srv := NewServer(Deps{Log: ts.deps.Log, State: ts.deps.State, Config: ts.deps.Config,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AccessLog: NewAccessLog(io.Discard, "text", slog.LevelInfo)})
	call := func(method, path, body string) []byte {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+key.Key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if w.Code >= 300 {
			b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		return w.Body.Bytes()
	}
	var agent, session struct{ ID string }
	json.Unmarshal(call("POST", "/v1/agents", `{"name":"Bench","sandbox_url":"https://sandbox.example.com/"}`), &agent)
	json.Unmarshal(call("POST", "/v1/sessions", `{"agent_id":"`+agent.ID+`","contact":{"name":"Pat","email":"pat@example.com"}}`), &session)
	body := call("GET", "/v1/sessions/"+session.ID, "")
	req := httptest.NewRequest("GET", "/v1/sessions/"+session.ID, nil)
	req.Header.Set("Authorization", "Bearer "+key.Key)
	bare := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}
	for _, h := range []struct {
		name  string
		serve http.HandlerFunc
	}{{"demosvc", srv.ServeHTTP}, {"bare", bare}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			w := &discardWriter{h: http.Header{}}
			for b.Loop() {
				clear(w.h)
				h.serve(w, req)
			}
		})
	}
}
