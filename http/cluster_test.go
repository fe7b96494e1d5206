package http

import (
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/config"
)

// follower is a ClusterNode that follows the writer at addr.
type follower struct{ addr string }

func (n follower) IsWriter() bool     { return false }
func (n follower) WriterAddr() string { return n.addr }
func (n follower) Roles() []string    { return []string{"follower"} }
func (n follower) Lag() uint64        { return 0 }
func (n follower) Joined() error      { return nil }
func (n follower) Following() error   { return nil }
func (n follower) InTouch() error     { return nil }

// node is a ClusterNode whose role a test sets: the writer, or a follower
// of the writer at addr ("": no writer).
type node struct {
	writer bool
	addr   atomic.Pointer[string]
}

func (n *node) IsWriter() bool { return n.writer }
func (n *node) WriterAddr() string {
	if a := n.addr.Load(); a != nil {
		return *a
	}
	return ""
}
func (n *node) Roles() []string  { return nil }
func (n *node) Lag() uint64      { return 0 }
func (n *node) Joined() error    { return nil }
func (n *node) Following() error { return nil }
func (n *node) InTouch() error   { return nil }

// testNodesSecret is the secret the test nodes share (serve derives it
// from the master key).
var testNodesSecret = []byte("the nodes' secret")

// clusterNode is a server of ts's state on a cluster node, with its own
// log lines and metrics.
func clusterNode(t *testing.T, ts *testServer, name string, n *node) (*httptest.Server, *syncBuffer) {
	logs := &syncBuffer{}
	d := ts.deps
	d.Logger = slog.New(slog.NewTextHandler(logs, nil))
	d.AccessLog, d.Metrics, d.Health = nil, nil, nil
	d.Cluster = &ClusterOptions{Node: n, Log: ts.deps.Log, NodeName: name, Scheme: "http", ReadWait: time.Second,
		ForwardTimeout: 5 * time.Second, Logger: d.Logger, Secret: testNodesSecret}
	srv := httptest.NewServer(NewServer(d))
	t.Cleanup(srv.Close)
	return srv, logs
}

// What the cluster handler answers itself, and the writes it forwards,
// go through front like every other request: a request id, a log line,
// metrics. A forwarded write has one id, the same on both nodes. X-Min-Seq
// is waited on only for an authenticated request.
func TestTheClusterLayerAnswersThroughFront(t *testing.T) {
	ts := newTestServer(t, nil)
	writer, writerLogs := clusterNode(t, ts, "n1", &node{writer: true})
	n := &node{}
	addr := strings.TrimPrefix(writer.URL, "http://")
	n.addr.Store(&addr)
	follower, followerLogs := clusterNode(t, ts, "n2", n)
	do := func(method, path, key string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, follower.URL+path, strings.NewReader(`{"name":"Ava","sandbox_url":"https://s.example.com"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			if header[i+1] != "" {
				req.Header.Set(header[i], header[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	line := func(logs *syncBuffer, id string) string {
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, "request_id="+id) {
				return l
			}
		}
		return ""
	}

	// With Expect: 100-continue too, which the writer must not answer.
	for _, expect := range []string{"", "100-continue"} {
		resp := do("POST", "/v1/agents", ts.key, "Expect", expect)
		ids := resp.Header.Values(headerRequestID)
		if resp.StatusCode != http.StatusCreated || len(ids) != 1 || resp.Header.Get(HeaderSeq) == "" || resp.Header.Get(HeaderPosition) == "" {
			t.Fatalf("a forwarded write (Expect %q): %d, X-Request-Id %q, X-Seq %q, X-Position %q; want 201, one id, a seq and a position",
				expect, resp.StatusCode, ids, resp.Header.Get(HeaderSeq), resp.Header.Get(HeaderPosition))
		}
		if l := line(followerLogs, ids[0]); !strings.Contains(l, "route=forwarded") || !strings.Contains(l, "status=201") {
			t.Errorf("the follower's line of the forwarded write (Expect %q): %q", expect, l)
		}
		if l := line(writerLogs, ids[0]); !strings.Contains(l, "method=POST route=/v1/agents status=201") {
			t.Errorf("the writer's line of the forwarded write (Expect %q), by the follower's id: %q\n%s", expect, l, writerLogs)
		}
	}

	none := ""
	n.addr.Store(&none)
	resp := do("POST", "/v1/agents", ts.key)
	id := resp.Header.Get(headerRequestID)
	if resp.StatusCode != http.StatusServiceUnavailable || id == "" {
		t.Fatalf("a write with no writer: %d, X-Request-Id %q", resp.StatusCode, id)
	}
	if l := line(followerLogs, id); !strings.Contains(l, "route=cluster") || !strings.Contains(l, "status=503") {
		t.Errorf("the follower's line of its own 503: %q", l)
	}
	metrics, err := http.Get(follower.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	for _, want := range []string{`demosvc_http_requests_total{code="503",method="POST",route="cluster"} 1`,
		`demosvc_http_requests_total{code="201",method="POST",route="forwarded"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the follower's metrics lack %s", want)
		}
	}

	// X-Min-Seq or X-Min-Position past the head: 401 at once for a bad
	// key, 503 once the wait runs out for a good one, 400 for one that is
	// not a number; reached, 200.
	for _, header := range []string{HeaderMinSeq, HeaderMinPosition} {
		for _, c := range []struct {
			key, min string
			want     int
		}{
			{"sk_live_bad", "1000000", http.StatusUnauthorized},
			{ts.key, "1000000", http.StatusServiceUnavailable},
			{ts.key, "soon", http.StatusBadRequest},
			{ts.key, "0", http.StatusOK},
		} {
			if resp := do("GET", "/v1/agents", c.key, header, c.min); resp.StatusCode != c.want {
				t.Errorf("%s %s with key %.8s: %d, want %d", header, c.min, c.key, resp.StatusCode, c.want)
			}
		}
	}

	// Sent by a client itself, the marker of a forwarded write, without
	// the nodes' secret, is not one: the writer gives the write an id of
	// its own, whatever the id sent, and a follower forwards it rather
	// than answering 503 as to a write forwarded to a node that is no
	// longer the writer.
	n.addr.Store(&addr)
	for _, mark := range []string{"n9", "n9 " + strings.Repeat("A", 43)} {
		for _, forged := range []string{"req_forged id", "req_01m8drnds63yx8fa3nv8000002"} {
			req, _ := http.NewRequest("POST", writer.URL+"/v1/agents", strings.NewReader(`{"name":"F","sandbox_url":"https://s.example.com"}`))
			req.Header.Set("Authorization", "Bearer "+ts.key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(headerForwarded, mark)
			req.Header.Set(headerRequestID, forged)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get(headerRequestID); resp.StatusCode != http.StatusCreated || got == forged || !strings.HasPrefix(got, "req_") {
				t.Errorf("to the writer, marker %q and id %q: %d, answered with id %q; want 201 and an id of its own", mark, forged, resp.StatusCode, got)
			}
		}
		resp := do("POST", "/v1/agents", ts.key, headerForwarded, mark)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("to a follower, marker %q: %d, want 201 (forwarded)", mark, resp.StatusCode)
		}
	}
	// A refused write carries no X-Seq, which a follower would wait for.
	if resp := do("POST", "/v1/agents", "sk_live_bad"); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get(HeaderSeq) != "" {
		t.Errorf("a write with a bad key through a follower: %d, X-Seq %q; want 401 and none", resp.StatusCode, resp.Header.Get(HeaderSeq))
	}
}

// forwardingTo is the cluster handler of a follower of the writer at addr.
func forwardingTo(ts *testServer, addr, scheme string, roots *x509.CertPool) http.Handler {
	return newClusterHandler(http.NotFoundHandler(), ClusterOptions{Node: follower{addr: addr}, Log: ts.deps.Log,
		NodeName: "n2", Scheme: scheme, ReadWait: time.Second, ForwardTimeout: time.Second, RootCAs: roots,
		Logger: slog.New(slog.DiscardHandler), Secret: testNodesSecret})
}

// A write forwarded by a follower keeps its client's address: the writer,
// trusting the nodes and the load balancer before them, names the client
// as the follower would have (it saw the follower's address before).
func TestAForwardedWriteKeepsTheClientsAddress(t *testing.T) {
	for _, header := range []string{config.ClientIPXForwardedFor, config.ClientIPForwarded} {
		t.Run(header, func(t *testing.T) {
			ts := newTestServer(t, func(c *config.Config) {
				c.HTTP.TrustedProxies = "127.0.0.1, 10.0.0.0/8"
				c.HTTP.ClientIPHeader = header
			})
			var seen string
			d := ts.deps
			d.Dashboard = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr })
			writer := httptest.NewServer(NewServer(d))
			defer writer.Close()
			f := forwardingTo(ts, strings.TrimPrefix(writer.URL, "http://"), "http", nil)
			// The load balancer at 10.0.0.9 names the client in the header.
			r := signInFrom("10.0.0.9:40000")
			if header == config.ClientIPForwarded {
				r.Header.Set("Forwarded", "for=198.51.100.9")
			} else {
				r.Header.Set("X-Forwarded-For", "198.51.100.9")
			}
			f.ServeHTTP(httptest.NewRecorder(), r)
			if seen != "198.51.100.9:0" {
				t.Errorf("the writer's dashboard saw %q, want the client 198.51.100.9", seen)
			}
			// A client straight to the follower, with no header.
			f.ServeHTTP(httptest.NewRecorder(), signInFrom("[2001:db8::7]:40000"))
			if seen != "[2001:db8::7]:0" {
				t.Errorf("the writer's dashboard saw %q, want the follower's peer 2001:db8::7", seen)
			}
		})
	}
}

// With no http.trusted_proxies, a writer still takes the client of a
// write another node forwarded from the chain that node wrote (its marker
// is signed): the client is counted and logged, not the node. A client
// that sends the marker and a chain itself is its own address.
func TestAWriterTrustsTheNodeThatForwardedAWrite(t *testing.T) {
	ts := newTestServer(t, nil)
	var seen string
	d := ts.deps
	d.Dashboard = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr })
	d.Cluster = &ClusterOptions{Node: &node{writer: true}, Log: ts.deps.Log, NodeName: "n1", Scheme: "http",
		ReadWait: time.Second, ForwardTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler), Secret: testNodesSecret}
	writer := httptest.NewServer(NewServer(d))
	defer writer.Close()
	f := forwardingTo(ts, strings.TrimPrefix(writer.URL, "http://"), "http", nil)
	f.ServeHTTP(httptest.NewRecorder(), signInFrom("198.51.100.9:40000"))
	if seen != "198.51.100.9:0" {
		t.Errorf("the writer's dashboard saw %q, want the client 198.51.100.9", seen)
	}
	// The same headers sent by a client straight to the writer.
	req, _ := http.NewRequest("POST", writer.URL+"/login", strings.NewReader("email=a%40example.com&password=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(headerForwarded, "n2 "+strings.Repeat("A", 43))
	req.Header.Set("X-Forwarded-For", "198.51.100.77")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen != "127.0.0.1:0" {
		t.Errorf("the writer's dashboard saw %q for a client's own marker and chain, want the client's peer 127.0.0.1", seen)
	}
}

// A follower answers a forwarded write once it has applied the entry the
// writer's answer names (X-Position), not only its records (X-Seq): a
// delivery's retry adds an entry and no record. Past cluster.read_wait it
// answers anyway, and says so.
func TestAForwardedWriteWaitsForItsPosition(t *testing.T) {
	for _, c := range []struct {
		seq, pos string
		waits    bool
	}{{"0", "1000000", true}, {"1000000", "0", true}, {"0", "0", false}} {
		writer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(HeaderSeq, c.seq)
			w.Header().Set(HeaderPosition, c.pos)
			w.WriteHeader(http.StatusOK)
		}))
		ts := newTestServer(t, nil) // at position 0: no replicated log
		logs := &syncBuffer{}
		f := newClusterHandler(http.NotFoundHandler(), ClusterOptions{Node: follower{addr: strings.TrimPrefix(writer.URL, "http://")},
			Log: ts.deps.Log, NodeName: "n2", Scheme: "http", ReadWait: 200 * time.Millisecond, ForwardTimeout: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(logs, nil)), Secret: testNodesSecret})
		w := httptest.NewRecorder()
		f.ServeHTTP(w, httptest.NewRequest("POST", "/v1/webhooks/wh_1/deliveries/dlv_1/retry", nil))
		writer.Close()
		warned := strings.Contains(logs.String(), "answering a forwarded write before this node applied it")
		if w.Code != http.StatusOK || warned != c.waits {
			t.Errorf("writer's answer at seq %s, position %s: %d, warned %v (want %v)\n%s", c.seq, c.pos, w.Code, warned, c.waits, logs)
		}
	}
}

// Over HTTPS a follower verifies the writer's certificate for the address
// the writer advertises, never for a name a client sends: connections are
// kept and shared between clients.
func TestAFollowerForwardsToAWriterServingHTTPS(t *testing.T) {
	writer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderSeq, "0")
		w.WriteHeader(http.StatusCreated)
	}))
	defer writer.Close()
	roots := x509.NewCertPool()
	roots.AddCert(writer.Certificate()) // for example.com, 127.0.0.1 and ::1
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(writer.URL, "https://"))
	ts := newTestServer(t, nil)
	for _, c := range []struct {
		advertised, host string
		want             int
	}{
		// Whatever the client calls the service, by name or address.
		{"127.0.0.1:" + port, "demos.example.net", http.StatusCreated},
		{"127.0.0.1:" + port, "10.0.0.2:8443", http.StatusCreated},
		{"127.0.0.1:" + port, "", http.StatusCreated},
		// localhost is 127.0.0.1 too, but the certificate does not name it.
		{"localhost:" + port, "localhost", http.StatusServiceUnavailable},
	} {
		f := forwardingTo(ts, c.advertised, "https", roots)
		r := httptest.NewRequest("POST", "/v1/agents", strings.NewReader(`{}`))
		r.Host = c.host
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("writer at %s, Host %q: %d %s, want %d", c.advertised, c.host, w.Code, w.Body, c.want)
		}
	}
}

// A writer that takes the connection and never answers is given up with
// a 503 the client may retry after a second; so is one that is gone.
func TestAForwardedWriteToAWriterThatHangsOrIsGoneEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 16)
	defer func() {
		ln.Close()
		for c := range held {
			c.Close()
		}
	}()
	go func() {
		defer close(held)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // never answered
		}
	}()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close()
	ts := newTestServer(t, nil)
	for name, addr := range map[string]string{"hangs": ln.Addr().String(), "is gone": goneAddr} {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			w := httptest.NewRecorder()
			forwardingTo(ts, addr, "http", nil).ServeHTTP(w, httptest.NewRequest("POST", "/v1/agents", strings.NewReader(`{}`)))
			done <- w
		}()
		select {
		case w := <-done:
			if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
				t.Errorf("a writer that %s: %d, Retry-After %q; want 503 with Retry-After: 1", name, w.Code, w.Header().Get("Retry-After"))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("a write forwarded to a writer that %s is still waiting after 30 s (ForwardTimeout 1 s)", name)
		}
	}
}

// signInFrom is a dashboard sign-in from remote, as a node receives it.
func signInFrom(remote string) *http.Request {
	r := httptest.NewRequest("POST", "/login", strings.NewReader("email=a%40example.com&password=x"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = remote
	return r
}

// A forwarding node's mark vouches for one write and one chain: the same
// mark on a write with another id, method, target or forwarding chain, or
// made with another secret, is not a node's.
func TestAForwardMarkCoversTheWriteAndItsChain(t *testing.T) {
	signed := func() *http.Request {
		r := httptest.NewRequest("POST", "/login?next=%2F", nil)
		r.Header.Set(headerRequestID, "req_01m8drnds63yx8fa3nv8000002")
		r.Header.Set("X-Forwarded-For", "198.51.100.9")
		r.Header.Add("Forwarded", `for="198.51.100.9"`)
		r.Header.Set(headerForwarded, forwardMark(testNodesSecret, "n2", r.Header.Get(headerRequestID), r))
		return r
	}
	if !forwardedByANode(testNodesSecret, signed()) {
		t.Fatal("a node's own mark is not taken")
	}
	for name, change := range map[string]func(r *http.Request){
		"request id":      func(r *http.Request) { r.Header.Set(headerRequestID, "req_01m8drnds63yx8fa3nv8000003") },
		"method":          func(r *http.Request) { r.Method = "PUT" },
		"path":            func(r *http.Request) { r.URL.Path = "/logout" },
		"query":           func(r *http.Request) { r.URL.RawQuery = "next=%2Fx" },
		"X-Forwarded-For": func(r *http.Request) { r.Header.Set("X-Forwarded-For", "203.0.113.1") },
		"Forwarded":       func(r *http.Request) { r.Header.Add("Forwarded", `for="203.0.113.1"`) },
		"node":            func(r *http.Request) { r.Header.Set(headerForwarded, "n3"+r.Header.Get(headerForwarded)[2:]) },
	} {
		r := signed()
		change(r)
		if forwardedByANode(testNodesSecret, r) {
			t.Errorf("a mark taken for a write with another %s", name)
		}
	}
	if forwardedByANode([]byte("another secret"), signed()) || forwardedByANode(nil, signed()) {
		t.Error("a mark taken under another secret, or none")
	}
}
