package delivery

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The deliveries' transport against real servers on 127.0.0.1: what it
// keeps, what it sends again, and how an exchange ends.

// countingServer is an httptest server that counts the connections it
// accepted and the requests it served.
type countingServer struct {
	*httptest.Server
	conns, requests atomic.Int64
}

func newCountingServer(t *testing.T, tlsOn bool, h http.HandlerFunc) *countingServer {
	cs := &countingServer{}
	cs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.requests.Add(1)
		h(w, r)
	}))
	cs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cs.conns.Add(1)
		}
	}
	if tlsOn {
		cs.EnableHTTP2 = true // offered: the transport asks for HTTP/1.1
		cs.StartTLS()
	} else {
		cs.Start()
	}
	t.Cleanup(cs.Close)
	return cs
}

// postTo POSTs body to url through tr within 5 s, reads the answer to its
// end and closes it, and returns its status and body.
func postTo(t *testing.T, tr *transport, ctx context.Context, url, body string) (int, string, error) {
	t.Helper()
	to, err := new(requests).to(url)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"evt_1"}}
	resp, err := tr.post(ctx, time.Now().Add(5*time.Second), to, h, []byte(body))
	if err != nil {
		return 0, "", err
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(got), err
}

func testTransport() *transport { return newTransport(true, 5*time.Second) }

// kept is the number of connections tr keeps.
func kept(tr *transport) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, cs := range tr.idle {
		n += len(cs)
	}
	return n
}

func TestTransportKeepsItsConnections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		handler   http.HandlerFunc
		wantConns int64 // for 3 posts
		wantKept  int
	}{
		{"a sized answer", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }, 1, 1},
		{"a chunked answer", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "o")
			w.(http.Flusher).Flush()
			io.WriteString(w, "k")
		}, 1, 1},
		{"an empty answer", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, 1, 1},
		{"Connection: close", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			io.WriteString(w, "ok")
		}, 3, 0},
		{"Keep-Alive: timeout=5", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Keep-Alive", "timeout=5")
			io.WriteString(w, "ok")
		}, 1, 1},
		{"Keep-Alive: timeout=1, too short to keep", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Keep-Alive", "timeout=1")
			io.WriteString(w, "ok")
		}, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newCountingServer(t, false, tc.handler)
			tr := testTransport()
			for i := range 3 {
				status, _, err := postTo(t, tr, t.Context(), srv.URL+"/hook", fmt.Sprintf(`{"n":%d}`, i))
				if err != nil || status/100 != 2 {
					t.Fatalf("post %d: %d, %v", i, status, err)
				}
			}
			if n := srv.conns.Load(); n != tc.wantConns {
				t.Errorf("3 posts took %d connections, want %d", n, tc.wantConns)
			}
			if n := kept(tr); n != tc.wantKept {
				t.Errorf("%d connections kept, want %d", n, tc.wantKept)
			}
		})
	}
}

// A receiver that says it closes idle connections after N seconds
// (Keep-Alive: timeout=N, as Node.js does after 5) has its connections
// kept a second less, so that no request is sent just as it closes one;
// a connection past that is not used again.
func TestTransportKeepsAConnectionNoLongerThanTheReceiverDoes(t *testing.T) {
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Keep-Alive", "timeout=5, max=1000")
		io.WriteString(w, "ok")
	})
	tr := testTransport()
	before := time.Now()
	if status, _, err := postTo(t, tr, t.Context(), srv.URL, "{}"); err != nil || status != 200 {
		t.Fatalf("post: %d %v", status, err)
	}
	after := time.Now()
	tr.mu.Lock()
	c := tr.idle[hostKey{"http", strings.TrimPrefix(srv.URL, "http://")}][0]
	expires := c.expires
	// As if those 4 s had passed: the clock of expiry is the real one.
	c.expires = time.Now().Add(-time.Millisecond)
	tr.mu.Unlock()
	if expires.Before(before.Add(4*time.Second)) || expires.After(after.Add(4*time.Second)) {
		t.Errorf("kept until %v after the post, want 4s", expires.Sub(before))
	}
	if status, _, err := postTo(t, tr, t.Context(), srv.URL, "{}"); err != nil || status != 200 {
		t.Fatalf("second post: %d %v", status, err)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2: an expired one is not used", n)
	}
}

// The reaper closes a connection when it expires, and comes sooner for a
// connection that expires before the one it was waiting for.
func TestTransportReapsAConnectionWhenItExpires(t *testing.T) {
	plain := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	brief := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Keep-Alive", "timeout=3") // kept for 2 s
		io.WriteString(w, "ok")
	})
	tr := testTransport()
	tr.idleTimeout = time.Hour // the reaper's first wait, for plain's connection
	for _, url := range []string{plain.URL, brief.URL} {
		if status, _, err := postTo(t, tr, t.Context(), url, "{}"); err != nil || status != 200 {
			t.Fatalf("post to %s: %d %v", url, status, err)
		}
	}
	if n := kept(tr); n != 2 {
		t.Fatalf("%d connections kept, want 2", n)
	}
	// Bounds a failing test only: the reaper's first wait is an hour.
	for deadline := time.Now().Add(30 * time.Second); kept(tr) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections kept 30 s on; brief's should have been closed after 2 s", kept(tr))
		}
	}
	tr.mu.Lock()
	_, left := tr.idle[hostKey{"http", strings.TrimPrefix(plain.URL, "http://")}]
	tr.mu.Unlock()
	if !left {
		t.Error("the connection closed is not the one that expired")
	}
}

func TestKeepAliveFor(t *testing.T) {
	const max = 90 * time.Second
	for _, tc := range []struct {
		vs   []string
		want time.Duration
	}{
		{nil, max},
		{[]string{"timeout=5"}, 4 * time.Second},
		{[]string{"timeout=5, max=1000"}, 4 * time.Second},
		{[]string{`timeout="5"`}, 4 * time.Second},
		{[]string{"timeout=5;max=100"}, 4 * time.Second},
		{[]string{"max=10 , Timeout = 3"}, 2 * time.Second},
		{[]string{"max=3", "timeout=7"}, 6 * time.Second},
		{[]string{"timeout=1"}, 0},
		{[]string{"timeout=0"}, -time.Second},
		{[]string{"timeout=600"}, max},
		{[]string{"timeout=abc"}, max},
		{[]string{"timeout=-5"}, max},
		{[]string{"timeouts=2"}, max},
	} {
		if got := keepAliveFor(tc.vs, max); got != tc.want {
			t.Errorf("keepAliveFor(%q) = %v, want %v", tc.vs, got, tc.want)
		}
	}
}

// A connection is kept past the deadline of the attempt that used it:
// the next attempt, after that deadline, takes it.
func TestTransportKeepsAConnectionPastTheLastDeadline(t *testing.T) {
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := testTransport()
	to, _ := new(requests).to(srv.URL)
	deadline := time.Now().Add(time.Second)
	resp, err := tr.post(t.Context(), deadline, to, http.Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitFor(t, "the first attempt's deadline to pass", func() bool { return time.Now().After(deadline) })
	if status, _, err := postTo(t, tr, t.Context(), srv.URL, "{}"); err != nil || status != 200 {
		t.Fatalf("second post: %d %v", status, err)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// The request on the wire: the POST line, Host, the headers given, the
// body's length and the body, nothing else.
func TestTransportSendsTheRequestAsGiven(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
	})
	to, _ := new(requests).to(srv.URL + "/in/hook?tenant=a%20b")
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"demosvc"}, "Webhook-Id": {"evt_1"}}
	resp, err := testTransport().post(t.Context(), time.Now().Add(5*time.Second), to, h, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Method != "POST" || got.URL.RequestURI() != "/in/hook?tenant=a%20b" || got.Host != strings.TrimPrefix(srv.URL, "http://") ||
		got.ContentLength != 7 || string(body) != `{"a":1}` || got.Proto != "HTTP/1.1" {
		t.Errorf("got %s %s %s host %s, %d bytes %q", got.Method, got.URL.RequestURI(), got.Proto, got.Host, got.ContentLength, body)
	}
	want := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"demosvc"}, "Webhook-Id": {"evt_1"}, "Content-Length": {"7"}}
	if fmt.Sprint(got.Header) != fmt.Sprint(want) {
		t.Errorf("headers %v, want %v", got.Header, want)
	}
}

func TestTransportRefusesAHeaderThatWouldSplitTheRequest(t *testing.T) {
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {})
	to, _ := new(requests).to(srv.URL)
	for _, h := range []http.Header{{"X-A": {"1\r\nX-Injected: 1"}}, {"X-A\r\nX-B": {"1"}}, {"": {"1"}}} {
		if _, err := testTransport().post(t.Context(), time.Now().Add(5*time.Second), to, h, nil); err == nil {
			t.Errorf("header %q was sent", h)
		}
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
}

// scriptedServer serves each connection with serve, numbered from 0,
// and counts the connections and the requests read.
type scriptedServer struct {
	url             string
	conns, requests atomic.Int64
}

func newScriptedServer(t *testing.T, serve func(n int64, c net.Conn, read func() bool)) *scriptedServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &scriptedServer{url: "http://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := s.conns.Add(1) - 1
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				serve(n, c, func() bool {
					req, err := http.ReadRequest(br)
					if err != nil {
						return false
					}
					io.Copy(io.Discard, req.Body)
					s.requests.Add(1)
					return true
				})
			}()
		}
	}()
	return s
}

// keptBroken waits until the connection tr keeps reads as broken
// (idleBroken): the receiver's close or its bytes have reached it.
func keptBroken(t *testing.T, tr *transport) {
	t.Helper()
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "netbsd", "openbsd", "dragonfly":
	default:
		t.Skip("no peek at a kept connection here (idleprobe_other.go)")
	}
	waitFor(t, "the kept connection to read as broken", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, cs := range tr.idle {
			return len(cs) == 1 && idleBroken(cs[0].Conn)
		}
		return false
	})
}

// A kept connection the receiver closed while it was idle does not take
// the next request: it goes out on a new connection, once.
func TestTransportDoesNotSendOnAConnectionClosedWhileIdle(t *testing.T) {
	closed := make(chan struct{}, 1)
	srv := newScriptedServer(t, func(n int64, c net.Conn, read func() bool) {
		if read() {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		if n == 0 {
			c.Close() // without a word, as a receiver's keep-alive timeout does
			closed <- struct{}{}
			return
		}
		for read() {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := testTransport()
	if status, _, err := postTo(t, tr, t.Context(), srv.url, "{}"); err != nil || status != 200 {
		t.Fatalf("first post: %d %v", status, err)
	}
	recv(t, closed, "the receiver to close the connection")
	keptBroken(t, tr)
	if status, body, err := postTo(t, tr, t.Context(), srv.url, "{}"); err != nil || status != 200 || body != "ok" {
		t.Fatalf("second post: %d %q %v", status, body, err)
	}
	if c, r := srv.conns.Load(), srv.requests.Load(); c != 2 || r != 2 {
		t.Errorf("%d connections, %d requests; want 2 and 2", c, r)
	}
}

// An answer a receiver sends on an idle connection, which no request
// asked for, is not taken for the next request's.
func TestTransportDoesNotTakeAnUnaskedAnswerForTheNextOne(t *testing.T) {
	unasked := make(chan struct{})
	srv := newScriptedServer(t, func(n int64, c net.Conn, read func() bool) {
		if n == 0 {
			if read() {
				io.WriteString(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
				<-unasked // once the answer was read and the connection kept
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
			}
			io.Copy(io.Discard, c) // reads nothing more as a request
			return
		}
		for read() {
			io.WriteString(c, "HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\n\r\nfresh")
		}
	})
	tr := testTransport()
	if status, _, err := postTo(t, tr, t.Context(), srv.url, "{}"); err != nil || status != 500 {
		t.Fatalf("first post: %d %v", status, err)
	}
	if n := kept(tr); n != 1 {
		t.Fatalf("%d connections kept, want 1", n)
	}
	close(unasked)
	keptBroken(t, tr)
	if status, body, err := postTo(t, tr, t.Context(), srv.url, "{}"); err != nil || status != 202 || body != "fresh" {
		t.Errorf("second post: %d %q %v; want 202 \"fresh\"", status, body, err)
	}
}

// Over TLS, an unasked answer that came in the same write as the answer,
// and so sits in tls.Conn's buffer rather than on the socket, is not taken
// for the next request's either.
func TestTransportDoesNotTakeAnUnaskedAnswerBufferedByTLS(t *testing.T) {
	cert := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate
	cert.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 0; ; n++ {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				hc := &holdingConn{Conn: raw}
				c := tls.Server(hc, &tls.Config{Certificates: cert.TLS.Certificates})
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if n == 0 { // two answers, two records, one write of the socket
						hc.hold()
						io.WriteString(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
						hc.release()
						io.Copy(io.Discard, c)
						return
					}
					io.WriteString(c, "HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\n\r\nfresh")
				}
			}()
		}
	}()
	tr := testTransport()
	roots := x509.NewCertPool()
	roots.AddCert(cert.Certificate())
	tr.tls = &tls.Config{RootCAs: roots}
	url := "https://" + ln.Addr().String()
	if status, _, err := postTo(t, tr, t.Context(), url, "{}"); err != nil || status != 500 {
		t.Fatalf("first post: %d %v", status, err)
	}
	if status, body, err := postTo(t, tr, t.Context(), url, "{}"); err != nil || status != 202 || body != "fresh" {
		t.Errorf("second post: %d %q %v; want 202 \"fresh\"", status, body, err)
	}
}

// holdingConn holds its writes between hold and release, and writes them
// then in one write.
type holdingConn struct {
	net.Conn
	held *bytes.Buffer
}

func (c *holdingConn) hold() { c.held = new(bytes.Buffer) }

func (c *holdingConn) release() {
	c.Conn.Write(c.held.Bytes())
	c.held = nil
}

func (c *holdingConn) Write(p []byte) (int, error) {
	if c.held != nil {
		return c.held.Write(p)
	}
	return c.Conn.Write(p)
}

// failingConn fails its writes while fail is set: n bytes written, then
// EPIPE.
type failingConn struct {
	net.Conn
	fail *atomic.Int64 // -1: no failure; else the bytes written before it
}

func (c failingConn) Write(p []byte) (int, error) {
	if n := c.fail.Load(); n >= 0 {
		return int(n), syscall.EPIPE
	}
	return c.Conn.Write(p)
}

// A request whose write fails on a kept connection before a byte left is
// sent once more on a new connection; one that may have reached the
// receiver is not.
func TestTransportSendsAgainOnlyWhatDidNotLeave(t *testing.T) {
	for _, tc := range []struct {
		written   int64
		wantConns int64
		wantErr   bool
	}{{0, 2, false}, {10, 1, true}} {
		t.Run(fmt.Sprintf("%d bytes written", tc.written), func(t *testing.T) {
			srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			tr := testTransport()
			fail := new(atomic.Int64)
			fail.Store(-1)
			var first atomic.Bool
			dial := tr.dial
			tr.dial = func(ctx context.Context, n, a string) (net.Conn, error) {
				c, err := dial(ctx, n, a)
				if err != nil || !first.CompareAndSwap(false, true) {
					return c, err
				}
				return failingConn{Conn: c, fail: fail}, nil // the first connection only
			}
			if status, _, err := postTo(t, tr, t.Context(), srv.URL, "{}"); err != nil || status != 200 {
				t.Fatalf("first post: %d %v", status, err)
			}
			fail.Store(tc.written)
			status, _, err := postTo(t, tr, t.Context(), srv.URL, "{}")
			if tc.wantErr != (err != nil) || err == nil && status != 200 {
				t.Errorf("second post: %d %v", status, err)
			}
			if n := srv.conns.Load(); n != tc.wantConns {
				t.Errorf("%d connections, want %d", n, tc.wantConns)
			}
		})
	}
}

func TestTransportSendsNothingOnceCancelled(t *testing.T) {
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := testTransport()
	if status, _, err := postTo(t, tr, t.Context(), srv.URL, "{}"); err != nil || status != 200 {
		t.Fatalf("first post: %d %v", status, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 20 {
		if _, _, err := postTo(t, tr, ctx, srv.URL, "{}"); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want %v", err, context.Canceled)
		}
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("%d requests, want the first only", n)
	}
}

// An exchange on a kept connection whose context was cancelled after
// post's own check sends nothing either.
func TestTransportExchangeSendsNothingOnceCancelled(t *testing.T) {
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := testTransport()
	if status, _, err := postTo(t, tr, t.Context(), srv.URL, "{}"); err != nil || status != 200 {
		t.Fatalf("first post: %d %v", status, err)
	}
	to, _ := new(requests).to(srv.URL)
	var wire bytes.Buffer
	writeRequest(&wire, to, http.Header{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c := tr.get(hostKey{"http", to.URL.Host})
	if c == nil {
		t.Fatal("no kept connection")
	}
	defer c.Close()
	if _, err := tr.exchange(ctx, time.Now().Add(5*time.Second), c, to, wire.Bytes()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want %v", err, context.Canceled)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("%d requests, want the first only", n)
	}
}

// The address dialled: the URL's host at its port, or its scheme's. The
// transport's dial is replaced: nothing is dialled and no name resolved.
func TestTransportDialsTheURLsHostAndPort(t *testing.T) {
	for url, want := range map[string]string{
		"http://example.com/hook":      "example.com:80",
		"https://example.com/hook":     "example.com:443",
		"http://example.com:8080/hook": "example.com:8080",
		"http://example.com:/hook":     "example.com:80",
		"https://[::1]/hook":           "[::1]:443",
		"http://[::1]:9000/h":          "[::1]:9000",
		"https://127.0.0.1:8443/in":    "127.0.0.1:8443",
	} {
		tr := testTransport()
		var got string
		tr.dial = func(_ context.Context, _, addr string) (net.Conn, error) {
			got = addr
			return nil, errors.New("not dialled: the test only reads the address")
		}
		postTo(t, tr, t.Context(), url, "{}")
		if got != want {
			t.Errorf("%s dialled %q, want %q", url, got, want)
		}
	}
}

// rawServer answers every connection with the bytes of answer, whatever
// it was sent.
func rawServer(t *testing.T, answer string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return rawServerOn(t, ln, answer)
}

// rawServerOn is rawServer on ln.
func rawServerOn(t *testing.T, ln net.Listener, answer string) string {
	return rawAnswering(t, ln, func(c net.Conn) { io.WriteString(c, answer) })
}

// rawAnswering serves every connection to ln with answer once it has read
// a request, and closes it when answer returns.
func rawAnswering(t *testing.T, ln net.Listener, answer func(net.Conn)) string {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				answer(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestTransportReadsAnAnswerAfterInformationalOnes(t *testing.T) {
	url := rawServer(t, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"+
		"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok")
	if status, body, err := postTo(t, testTransport(), t.Context(), url, "{}"); err != nil || status != 202 || body != "ok" {
		t.Errorf("%d %q %v; want 202 \"ok\"", status, body, err)
	}
}

func TestTransportBoundsTheAnswersHead(t *testing.T) {
	// One long line, and many short ones: the bound may cut a line in two,
	// which is still the bound's error, not a malformed header.
	var many strings.Builder
	for many.Len() < 2*maxResponseHeader {
		many.WriteString("X-Header-With-A-Long-Name: v\r\n")
	}
	for _, head := range []string{"X-Big: " + strings.Repeat("x", maxResponseHeader) + "\r\n", many.String()} {
		url := rawServer(t, "HTTP/1.1 200 OK\r\n"+head+"\r\n")
		if _, _, err := postTo(t, testTransport(), t.Context(), url, "{}"); !errors.Is(err, errResponseHeaderTooLarge) {
			t.Errorf("err %v, want %v", err, errResponseHeaderTooLarge)
		}
	}
}

// A receiver may answer before it has read the whole request (a 401, a
// 413, a 410) and close: the write then fails part-way, and the answer
// waiting on the socket is still the attempt's. The receiver reads only
// the request's head; a body of 4 MiB is far more than the sockets'
// buffers of 64 KiB on both sides hold, so the write is still under way
// when it closes. A 2xx answered so is no success: the request was not
// taken whole.
func TestTransportReadsAnAnswerGivenBeforeTheRequestWasRead(t *testing.T) {
	early := func(answer string) string {
		lc := net.ListenConfig{Control: smallSocketBuffers}
		ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return rawServerOn(t, ln, answer)
	}
	newTr := func() *transport {
		tr := testTransport()
		tr.dial = (&net.Dialer{Control: smallSocketBuffers}).DialContext
		return tr
	}
	body := strings.Repeat("x", 4<<20)

	tr := newTr()
	status, got, err := postTo(t, tr, t.Context(), early("HTTP/1.1 413 Content Too Large\r\nContent-Length: 2\r\n\r\nno"), body)
	if err != nil || status != http.StatusRequestEntityTooLarge || got != "no" {
		t.Fatalf("status %d, body %q, err %v; want 413 and its body", status, got, err)
	}
	if n := kept(tr); n != 0 {
		t.Errorf("%d connections kept; the one whose request was cut short must be closed", n)
	}

	tr = newTr()
	status, _, err = postTo(t, tr, t.Context(), early("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), body)
	if err == nil || !strings.Contains(err.Error(), "the receiver answered 200 before the whole request was sent") {
		t.Errorf("status %d, err %v; want the early 200 refused", status, err)
	}
	if n := kept(tr); n != 0 {
		t.Errorf("%d connections kept after an early 200", n)
	}
}

// An answer closed before its end closes its connection at once: the
// transport does not read the rest of it to keep the connection.
func TestTransportClosesAConnectionWhoseAnswerWasNotRead(t *testing.T) {
	quit := make(chan struct{})
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		io.WriteString(w, "0123456789")
		w.(http.Flusher).Flush()
		select { // the rest never comes
		case <-r.Context().Done():
		case <-quit:
		}
	})
	t.Cleanup(func() { close(quit) }) // before the server's Close
	tr := testTransport()
	to, _ := new(requests).to(srv.URL)
	resp, err := tr.post(t.Context(), time.Now().Add(time.Hour), to, http.Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { resp.Body.Close(); close(closed) }()
	recv(t, closed, "the answer's Close to return")
	if n := kept(tr); n != 0 {
		t.Errorf("%d connections kept, want none", n)
	}
}

func TestTransportEndsAnExchangeAtItsDeadlineOrWhenCancelled(t *testing.T) {
	arrived, quit := make(chan string, 2), make(chan struct{})
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("X-N")
		select { // answers never: the client gives up
		case <-r.Context().Done():
		case <-quit:
		}
	})
	t.Cleanup(func() { close(quit) }) // before the server's Close
	tr := testTransport()
	to, _ := new(requests).to(srv.URL)

	_, err := tr.post(t.Context(), time.Now().Add(time.Second), to, http.Header{"X-N": {"1"}}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past its deadline: %v, want %v", err, context.DeadlineExceeded)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := tr.post(ctx, time.Now().Add(time.Hour), to, http.Header{"X-N": {"2"}}, nil)
		done <- err
	}()
	for recv(t, arrived, "the second request") != "2" { // the first may arrive, late
	}
	cancel()
	if err := recv(t, done, "the cancelled post to return"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want %v", err, context.Canceled)
	}
}

// Over TLS the transport verifies the receiver's certificate against its
// roots, speaks HTTP/1.1 though HTTP/2 is offered, and keeps the
// connection; a certificate it does not trust ends the exchange.
func TestTransportSpeaksHTTP1OverTLS(t *testing.T) {
	var protos sync.Map
	srv := newCountingServer(t, true, func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		io.WriteString(w, "ok")
	})
	if _, _, err := postTo(t, testTransport(), t.Context(), srv.URL, "{}"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an untrusted certificate: %v", err)
	}
	tr := testTransport()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tr.tls = &tls.Config{RootCAs: roots}
	for i := range 3 {
		if status, body, err := postTo(t, tr, t.Context(), srv.URL, "{}"); err != nil || status != 200 || body != "ok" {
			t.Fatalf("post %d: %d %q %v", i, status, body, err)
		}
	}
	if n := srv.conns.Load(); n != 2 { // the refused one, then one kept
		t.Errorf("%d connections, want 2", n)
	}
	protos.Range(func(p, _ any) bool {
		if p != "HTTP/1.1" {
			t.Errorf("spoke %s", p)
		}
		return true
	})
}

// A webhook URL whose query holds a space or non-ASCII characters (one
// registered before spaces were refused) is sent a request line a
// receiver reads, those bytes percent-encoded, the path as RequestURI
// escapes it.
func TestARequestTargetIsPercentEncodedWhereItMustBe(t *testing.T) {
	got := make(chan string, 1)
	srv := newCountingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		got <- r.RequestURI
		io.WriteString(w, "ok")
	})
	status, _, err := postTo(t, testTransport(), t.Context(), srv.URL+"/a b/é?x=1 2&y=ü", "{}")
	if err != nil || status != 200 {
		t.Fatalf("post: %d %v, want 200", status, err)
	}
	if uri := <-got; uri != "/a%20b/%C3%A9?x=1%202&y=%C3%BC" {
		t.Errorf("the receiver read the target %q", uri)
	}
	var wire bytes.Buffer
	writeTarget(&wire, "/plain?x=1")
	if wire.String() != "/plain?x=1" {
		t.Errorf("a plain target written as %q", wire.String())
	}
}

// A receiver that stops in the middle of its status line has given no
// complete answer in time: the attempt says so, where bufio's dropping of
// the deadline's error for the part of the line it held made it a
// malformed answer.
func TestTransportTakesAnAnswerCutByItsDeadlineForATimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	url := rawAnswering(t, ln, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.")
		<-quit
	})
	t.Cleanup(func() { close(quit) }) // before the listener's Close
	to, _ := new(requests).to(url)
	_, err = testTransport().post(t.Context(), time.Now().Add(time.Second), to, http.Header{}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an answer cut at its deadline: %v, want %v", err, context.DeadlineExceeded)
	}
}
