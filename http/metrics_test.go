package http

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// series counts the series of /metrics whose name begins with prefix.
func series(t *testing.T, url, prefix string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

// TestInventedMethodsAndPathsAddNoSeries sends requests with invented
// methods and paths and expects the number of request series to stop
// growing after the first round: every label value is from a fixed set.
func TestInventedMethodsAndPathsAddNoSeries(t *testing.T) {
	ts := newTestServer(t, nil)
	// The account's bucket on a clock that stands still: it refills in
	// no amount of time the test takes (5 requests a second on the pro
	// plan's, which a slow run would give back).
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts.accounts = NewLimiters(func() time.Time { return frozen }, 0)
	l := serveLive(t, ts)
	round := func(r int) {
		for i := 0; i < 100; i++ {
			for _, path := range []string{fmt.Sprintf("/v1/agents/x%d_%d", r, i), fmt.Sprintf("/x%d_%d", r, i), "/v1/agents", "/healthz"} {
				req, _ := http.NewRequest(fmt.Sprintf("M%dX%d", r, i), l.url+path, nil)
				if i%2 == 0 {
					req.Header.Set("Authorization", "Bearer "+l.ts.key)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
		}
	}
	// The first rounds meet every answer there is: 401 for bad keys, 404,
	// 405, /metrics itself, and 429 once the account's bucket (300 a
	// minute, the pro plan) is empty, which it is first made.
	for i := 0; i < 301; i++ {
		req, _ := http.NewRequest("MZ", l.url+"/v1/zz", nil)
		req.Header.Set("Authorization", "Bearer "+l.ts.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if i == 300 && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the 301st request of the minute: %d, want 429", resp.StatusCode)
		}
	}
	round(0)
	series(t, l.url, "demosvc_http_")
	round(1)
	before := series(t, l.url, "demosvc_http_")
	round(2)
	round(3)
	after := series(t, l.url, "demosvc_http_")
	if after != before {
		t.Errorf("demosvc_http_ series: %d after two rounds of 400 invented requests, %d after four; want no growth", before, after)
	}
	if requests := series(t, l.url, "demosvc_http_requests_total{"); requests > 20 {
		t.Errorf("%d request series from four routes; want a handful", requests)
	}
}

// A status's label is its code when the server writes that status, else its
// class, else "other", and taking it allocates nothing.
func TestCodeLabel(t *testing.T) {
	for code, want := range map[int]string{200: "200", 201: "201", 204: "204", 404: "404", 429: "429",
		206: "2xx", 418: "4xx", 599: "5xx", 600: "other", 99: "other", -1: "other", 1 << 20: "other"} {
		if got := codeLabel(code); got != want {
			t.Errorf("codeLabel(%d) = %q, want %q", code, got, want)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { codeLabel(201) }); allocs != 0 {
		t.Errorf("codeLabel allocates %.1f times a call", allocs)
	}
}
