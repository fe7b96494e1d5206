package http

import (
	"io"
	"log/slog"
	"net/http/httptest"
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
