package http

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"demosvc/config"
)

func TestTheClientAddressComesFromForwardingHeadersOnlyBehindATrustedProxy(t *testing.T) {
	xff := proxies{prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	fwd := xff
	fwd.forwarded = true
	for _, tc := range []struct {
		name, peer string
		header     [][2]string
		want       string
		forwarded  bool // http.client_ip_header is Forwarded
	}{
		{"no proxy in between", "203.0.113.7:5000", nil, "203.0.113.7", false},
		{"an untrusted peer cannot pick its address", "203.0.113.7:5000", [][2]string{{"X-Forwarded-For", "198.51.100.1"}}, "203.0.113.7", false},
		{"a trusted proxy names the client", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "198.51.100.1"}}, "198.51.100.1", false},
		{"a spoofed entry before the real client is skipped", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "1.2.3.4, 198.51.100.1, 10.9.9.9"}}, "198.51.100.1", false},
		{"several header lines", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "1.2.3.4"}, {"X-Forwarded-For", "198.51.100.2"}}, "198.51.100.2", false},
		// A proxy that sets X-Forwarded-For passes a client's Forwarded
		// through, and the other way round: only the one configured is read.
		{"X-Forwarded-For is read, a client's Forwarded is not", "10.1.2.3:5000", [][2]string{{"Forwarded", "for=203.0.113.9"}, {"X-Forwarded-For", "198.51.100.7"}}, "198.51.100.7", false},
		{"Forwarded alone is not read", "10.1.2.3:5000", [][2]string{{"Forwarded", "for=203.0.113.9"}}, "10.1.2.3", false},
		{"Forwarded is read, a client's X-Forwarded-For is not", "10.1.2.3:5000", [][2]string{{"Forwarded", `for="[2001:db8::7]:443";proto=https, for=10.0.0.5`}, {"X-Forwarded-For", "1.2.3.4"}}, "2001:db8::7", true},
		{"X-Forwarded-For alone is not read", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "1.2.3.4"}}, "10.1.2.3", true},
		{"an obfuscated Forwarded falls back to the peer", "10.1.2.3:5000", [][2]string{{"Forwarded", "for=_hidden"}}, "10.1.2.3", true},
		{"a zone falls back to the peer", "10.1.2.3:5000", [][2]string{{"Forwarded", `for="fe80::1%x level=ERROR msg=forged"`}}, "10.1.2.3", true},
		{"a zone in X-Forwarded-For falls back to the peer", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "fe80::1%eth0"}}, "10.1.2.3", false},
		{"a zone with a port falls back to the peer", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "[fe80::1%eth0]:443"}}, "10.1.2.3", false},
		{"garbage falls back to the peer", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "not an address"}}, "10.1.2.3", false},
		// nginx and Caddy append to what the client sent: garbage the
		// client wrote before its own address is never read.
		{"a client's garbage before its address is not read", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "unknown, 198.51.100.9"}}, "198.51.100.9", false},
		{"a client's obfuscated hop before its address is not read", "10.1.2.3:5000", [][2]string{{"Forwarded", "for=_hidden, for=198.51.100.9"}}, "198.51.100.9", true},
		{"garbage after the client, from a trusted proxy, falls back to the peer", "10.1.2.3:5000", [][2]string{{"X-Forwarded-For", "198.51.100.9, unknown"}}, "10.1.2.3", false},
		{"every hop trusted: the first one", "[::1]:5000", [][2]string{{"X-Forwarded-For", "10.0.0.1, 10.0.0.2"}}, "10.0.0.1", false},
		{"IPv4-mapped peers count as IPv4", "[::ffff:10.1.2.3]:5000", [][2]string{{"X-Forwarded-For", "198.51.100.3"}}, "198.51.100.3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			for _, h := range tc.header {
				r.Header.Add(h[0], h[1])
			}
			p := xff
			if tc.forwarded {
				p = fwd
			}
			if got := p.clientAddr(r); got != tc.want {
				t.Errorf("clientAddr = %s, want %s", got, tc.want)
			}
		})
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:5000"
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	if got := (proxies{}).clientAddr(r); got != "10.1.2.3" {
		t.Errorf("with no trusted proxies, clientAddr = %s, want the peer", got)
	}
	for peer, want := range map[string]string{
		"203.0.113.7:5000": "203.0.113.7", "[::1]:5000": "::1", "[2001:db8::7]:443": "2001:db8::7",
		"[::ffff:10.1.2.3]:5000": "10.1.2.3", "no port": "no port",
	} {
		r.RemoteAddr = peer
		if got := (proxies{}).clientAddr(r); got != want {
			t.Errorf("with no trusted proxies, the peer %s is %s, want %s", peer, got, want)
		}
	}
}

// The bad-key limiter counts per client behind a trusted proxy: two
// clients behind one proxy do not share a budget, and one client cannot
// escape its budget by changing the header when it is not a proxy.
func TestTheBadKeyLimiterUsesTheForwardedClientBehindATrustedProxy(t *testing.T) {
	ts := newTestServer(t, func(c *config.Config) {
		c.HTTP.TrustedProxies = "10.0.0.0/8"
		c.Auth.FailuresPerMinute = 2
	})
	try := func(peer, xff string) string {
		r := httptest.NewRequest("GET", "/v1/account", nil)
		r.RemoteAddr = peer
		r.Header.Set("Authorization", "Bearer sk_wrong")
		r.Header.Set("X-Forwarded-For", xff)
		w := httptest.NewRecorder()
		ts.ServeHTTP(w, r)
		return badKeyAnswer(w)
	}
	for range 2 {
		if got := try("10.0.0.1:1", "198.51.100.1"); got != unauthorized {
			t.Fatalf("bad key within the budget = %s, want %s", got, unauthorized)
		}
	}
	if got := try("10.0.0.1:1", "198.51.100.1"); got != limited {
		t.Errorf("third bad key of one client = %s, want %s", got, limited)
	}
	if got := try("10.0.0.1:1", "198.51.100.2"); got != unauthorized {
		t.Errorf("another client behind the same proxy = %s, want %s (its own budget)", got, unauthorized)
	}
	for range 2 {
		try("203.0.113.9:1", "198.51.100.50")
	}
	if got := try("203.0.113.9:1", "198.51.100.51"); got != limited {
		t.Errorf("an untrusted peer changing X-Forwarded-For = %s, want %s (keyed on the peer)", got, limited)
	}
	// A client behind the proxy sending a Forwarded header of its own,
	// which the proxy passes through, still has one budget.
	for i := range 3 {
		r := httptest.NewRequest("GET", "/v1/account", nil)
		r.RemoteAddr = "10.0.0.1:1"
		r.Header.Set("Authorization", "Bearer sk_wrong")
		r.Header.Set("X-Forwarded-For", "198.51.100.60")
		r.Header.Set("Forwarded", fmt.Sprintf("for=203.0.113.%d", i))
		w := httptest.NewRecorder()
		ts.ServeHTTP(w, r)
		if want, got := map[bool]string{true: limited, false: unauthorized}[i == 2], badKeyAnswer(w); got != want {
			t.Errorf("bad key %d with a Forwarded of its own = %s, want %s", i+1, got, want)
		}
	}
}

// Behind a trusted proxy, the request log line and the dashboard (its
// sign-in limits and session records) see the forwarded client too.
func TestTheLogLineAndTheDashboardSeeTheForwardedClient(t *testing.T) {
	ts := newTestServer(t, func(c *config.Config) { c.HTTP.TrustedProxies = "10.0.0.0/8" })
	var seen string
	d := ts.deps
	d.Dashboard = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr })
	s := NewServer(d)
	for _, path := range []string{"/login", "/healthz"} {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = "10.0.0.1:1"
		r.Header.Set("X-Forwarded-For", "198.51.100.9")
		s.ServeHTTP(httptest.NewRecorder(), r)
	}
	if seen != "198.51.100.9:0" {
		t.Errorf("the dashboard saw RemoteAddr %q, want the forwarded client", seen)
	}
	if !strings.Contains(ts.logs.String(), "route=/healthz") || !strings.Contains(ts.logs.String(), "client=198.51.100.9") {
		t.Errorf("the request log line does not name the forwarded client:\n%s", ts.logs)
	}
}
