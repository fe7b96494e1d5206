package http

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/projections"
)

// loadClients is the number of concurrent keep-alive clients in the HTTP
// benchmarks.
const loadClients = 16

// load sends n GETs to url from loadClients goroutines and returns the
// elapsed time. It fails b on any non-200.
func load(b *testing.B, client *http.Client, url, key string, n int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < loadClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// compareWithBare runs the same load against stackURL and a bare handler
// serving body, alternating in rounds so that noise on this shared machine
// hits both alike, and reports both rates and their ratio.
func compareWithBare(b *testing.B, stackURL, key string, body []byte) {
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer bare.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: loadClients}}
	defer client.CloseIdleConnections()
	// Warm both up: connections, buffers, JIT-free but cache-warm.
	load(b, client, bare.URL, key, 200)
	load(b, client, stackURL, key, 200)
	b.ResetTimer()
	const round = 2000
	var tBare, tStack time.Duration
	var done int
	for done < b.N {
		n := min(round, b.N-done)
		tBare += load(b, client, bare.URL, key, n)
		tStack += load(b, client, stackURL, key, n)
		done += n
	}
	b.StopTimer()
	bareRate := float64(done) / tBare.Seconds()
	stackRate := float64(done) / tStack.Seconds()
	b.ReportMetric(bareRate, "bare-req/s")
	b.ReportMetric(stackRate, "stack-req/s")
	b.ReportMetric(stackRate/bareRate, "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAccountVsBare measures GET /v1/account through the whole stack
// (request id, auth, limiter on an unlimited account, slog line, metrics)
// against a bare handler returning the same bytes, both over loopback.
// Target: ratio >= 0.85.
func BenchmarkAccountVsBare(b *testing.B) {
	ts := newBenchServer(b)
	acc, err := ts.state.CreateAccount(b.Context(), "cli", "Bench", projections.PlanEnterprise, 0)
	if err != nil {
		b.Fatal(err)
	}
	key, err := ts.state.CreateKey(b.Context(), "cli", acc.ID)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	// The bare handler answers with exactly what the stack answers.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/account", nil)
	req.Header.Set("Authorization", "Bearer "+key.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	compareWithBare(b, srv.URL+"/v1/account", key.Key, body)
}

// newBenchServer is newTestServer with the request log going to a real
// slog handler that discards, as a production server writes its log lines.
func newBenchServer(b *testing.B) *testServer {
	ts := newTestServerTB(b, nil)
	ts.deps.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	return ts
}
