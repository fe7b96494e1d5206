package http

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A handler that panics is answered 500 while nothing of its answer is
// out; once part of it is, the connection is reset, so that the client
// does not take a cut answer for a whole one.
func TestAPanicAfterTheAnswerBeganResetsTheConnection(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	front := newFront(logger, NewAccessLog(io.Discard, "text", slog.LevelInfo), NewMetrics(func() float64 { return 0 }), proxies{},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/late" {
				w.Header().Set("Content-Type", "text/csv")
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, strings.Repeat("row,of,an,export\n", 1000)) // past net/http's 4 KiB buffer
			}
			panic("a bug")
		}))
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/early")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"internal_error"`) {
		t.Errorf("a panic before any answer: %d %s, want 500 internal_error", resp.StatusCode, body)
	}

	resp, err = http.Get(srv.URL + "/late")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Error("a panic midway through an answer: the client read it whole, want the connection reset")
	}
}

// A body that stops arriving is answered when the read timeout ends,
// without the socket addresses the reader's error names.
func TestAStalledBodyIsRefusedWithoutTheServersAddresses(t *testing.T) {
	ts := newTestServer(t, nil)
	srv := httptest.NewUnstartedServer(ts)
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{", ts.key)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a failing test only
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "did not arrive") ||
		strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), "tcp") {
		t.Errorf("a stalled body: %d %s; want 400 saying it did not arrive, naming no address", resp.StatusCode, body)
	}
}
