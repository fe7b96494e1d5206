package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// serve accepts at most http.max_connections client connections at once:
// a connection past the bound waits in the kernel's backlog and is served
// once another closes, so that idle connections can never take the file
// handles the store needs.
func TestServeServesAtMostMaxConnectionsAtOnce(t *testing.T) {
	base, _ := startServe(t, map[string]string{"DEMOSVC_HTTP_MAX_CONNECTIONS": "1", "DEMOSVC_DASHBOARD_ENABLED": "false"})
	http.DefaultClient.CloseIdleConnections() // the readiness poll's connection would hold the one place
	addr := strings.TrimPrefix(base, "http://")
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second)) // bounds a failing test only
		return c, bufio.NewReader(c)
	}
	get := func(c net.Conn, r *bufio.Reader, path string) string {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(b)
	}
	c1, r1 := dial()
	get(c1, r1, "/healthz") // c1 now holds the one place, kept alive
	c2, r2 := dial()
	fmt.Fprintf(c2, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	get(c1, r1, "/healthz")
	// Three round trips on c1 later, c2's request is not among those served.
	metrics := get(c1, r1, "/metrics")
	m := regexp.MustCompile(`demosvc_http_requests_total\{code="200",method="GET",route="/healthz"\} (\d+)`).FindStringSubmatch(metrics)
	if m == nil || m[1] != "2" {
		t.Fatalf("GETs of /healthz served while c1 is open: %v, want c1's 2 only", m)
	}
	c1.Close() // its place goes to c2
	resp, err := http.ReadResponse(r2, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("c2's request once c1 closed: %v, %v", resp, err)
	}
	resp.Body.Close()
}
