package http

import (
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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

// forwardingTo is the cluster handler of a follower of the writer at addr.
func forwardingTo(ts *testServer, addr, scheme string, roots *x509.CertPool) http.Handler {
	return NewClusterHandler(http.NotFoundHandler(), ClusterOptions{Node: follower{addr: addr}, Log: ts.deps.Log,
		NodeName: "n2", Scheme: scheme, ReadWait: time.Second, ForwardTimeout: time.Second, RootCAs: roots,
		Logger: slog.New(slog.DiscardHandler)})
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
			r := httptest.NewRequest("POST", "/login", strings.NewReader("email=a%40example.com&password=x"))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.RemoteAddr = "10.0.0.9:40000"
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
			r = httptest.NewRequest("POST", "/login", strings.NewReader("email=a%40example.com&password=x"))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.RemoteAddr = "[2001:db8::7]:40000"
			f.ServeHTTP(httptest.NewRecorder(), r)
			if seen != "[2001:db8::7]:0" {
				t.Errorf("the writer's dashboard saw %q, want the follower's peer 2001:db8::7", seen)
			}
		})
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
