package http

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLimitersAllowExactlyOneMinuteOfRequests(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewLimiters(clock.now, 0)
	for i := 0; i < 60; i++ {
		d := l.Take("acc_a", 60)
		if !d.Allowed {
			t.Fatalf("request %d refused", i+1)
		}
		if d.Remaining != 59-i {
			t.Errorf("request %d: remaining = %d, want %d", i+1, d.Remaining, 59-i)
		}
	}
	d := l.Take("acc_a", 60)
	if d.Allowed {
		t.Fatal("61st request allowed")
	}
	if d.RetryAfter != time.Second {
		t.Errorf("RetryAfter = %v, want 1s (one token at 1/s)", d.RetryAfter)
	}
	if d.Reset != time.Minute {
		t.Errorf("Reset = %v, want 1m", d.Reset)
	}

	t.Run("tokens come back evenly", func(t *testing.T) {
		clock.advance(time.Second)
		if !l.Take("acc_a", 60).Allowed {
			t.Error("no token back after 1 s at 60/min")
		}
		if l.Take("acc_a", 60).Allowed {
			t.Error("two tokens back after 1 s at 60/min")
		}
	})
	t.Run("accounts do not share a bucket", func(t *testing.T) {
		if !l.Take("acc_b", 60).Allowed {
			t.Error("acc_b refused because acc_a is empty")
		}
	})
	t.Run("zero is unlimited and keeps nothing", func(t *testing.T) {
		before := l.Len()
		for i := 0; i < 1000; i++ {
			if !l.Take("acc_c", 0).Allowed {
				t.Fatal("unlimited account refused")
			}
		}
		if l.Len() != before {
			t.Error("an unlimited account got a bucket")
		}
	})
	t.Run("a plan change takes effect", func(t *testing.T) {
		if d := l.Take("acc_a", 300); !d.Allowed || d.Limit != 300 {
			t.Errorf("after the limit rose to 300: %+v", d)
		}
	})
}

// A flood of new keys keeps the buckets bounded, yet never shuts out a key
// it has not seen (a sign-in from a new address), nor frees a key that is
// being limited from its count.
func TestLimitersStayBoundedUnderAFloodOfNewKeys(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewLimiters(clock.now, 100)
	for range 60 {
		l.Take("198.51.100.9", 60)
	}
	if l.Take("198.51.100.9", 60).Allowed {
		t.Fatal("the 61st request of a minute was allowed")
	}
	for i := 0; i < 10_000; i++ {
		if !l.Take(fmt.Sprintf("10.0.%d.%d", i/256, i%256), 60).Allowed {
			t.Fatalf("new key %d refused while the buckets are full", i)
		}
		if l.Len() > 100 {
			t.Fatalf("%d buckets kept, bound is 100", l.Len())
		}
	}
	if !l.Take("192.0.2.1", 60).Allowed {
		t.Error("a new address is refused after the flood")
	}
	if d := l.Take("198.51.100.9", 60); d.Allowed || d.Remaining != 0 {
		t.Errorf("the limited address after the flood: %+v; want still refused, its bucket kept", d)
	}
}

// TestBadKeysFromOneIPv6SlashSixtyFourShareABucket sends bad keys from
// many addresses of one /64 and expects them counted together, while
// another /64 and IPv4 addresses keep their own.
func TestBadKeysFromOneIPv6SlashSixtyFourShareABucket(t *testing.T) {
	ts := newTestServer(t, nil)
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts.badAuth = NewLimiters(func() time.Time { return frozen }, maxBadAuthClients)
	send := func(remote string) string {
		req := httptest.NewRequest("GET", "/v1/account", nil)
		req.RemoteAddr = remote
		req.Header.Set("Authorization", "Bearer sk_bad")
		w := httptest.NewRecorder()
		ts.ServeHTTP(w, req)
		return badKeyAnswer(w)
	}
	counts := map[string]int{}
	for i := 0; i < 200; i++ {
		counts[send(fmt.Sprintf("[2001:db8:1:2:%x:%x::%x]:443", i, i*7, i+1))]++
	}
	if counts[unauthorized] != 60 || counts[limited] != 140 {
		t.Errorf("200 bad keys from one /64: %v; want 60 x %s then %s", counts, unauthorized, limited)
	}
	if got := send("[2001:db8:1:3::1]:443"); got != unauthorized {
		t.Errorf("another /64: %s, want %s (a bucket of its own)", got, unauthorized)
	}
	if got := send("[::ffff:198.51.100.7]:443"); got != unauthorized {
		t.Errorf("an IPv4-mapped address: %s, want %s", got, unauthorized)
	}
	if got := send("198.51.100.8:443"); got != unauthorized {
		t.Errorf("an IPv4 address: %s, want %s", got, unauthorized)
	}
	// Over its budget, a request with two Authorization headers is still
	// a malformed request (400), not a bad key.
	req := httptest.NewRequest("GET", "/v1/account", nil)
	req.RemoteAddr = "[2001:db8:1:2::9]:443"
	req.Header["Authorization"] = []string{"Bearer sk_bad", "Bearer sk_bad"}
	w := httptest.NewRecorder()
	ts.ServeHTTP(w, req)
	if got := badKeyAnswer(w); got != "400 invalid_request" {
		t.Errorf("two Authorization headers from an address over its budget: %s, want 400 invalid_request", got)
	}
	if n := ts.badAuth.Len(); n != 4 {
		t.Errorf("%d buckets, want 4 (one /64, another /64, two IPv4)", n)
	}
}

func TestClientAddrGroupsIPv6ByItsSlashSixtyFour(t *testing.T) {
	for remote, want := range map[string]string{
		"198.51.100.7:1":                  "198.51.100.7",
		"[::ffff:198.51.100.7]:1":         "198.51.100.7",
		"[2001:db8:1:2:aaaa:bbbb:cc:d]:1": "2001:db8:1:2::/64",
		"[2001:db8:1:2::1%eth0]:1":        "2001:db8:1:2::/64",
		"[::1]:1":                         "::/64",
		"not an address":                  "not an address",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if got := LimiterKey((proxies{}).clientAddr(r)); got != want {
			t.Errorf("clientAddr(%q) = %q, want %q", remote, got, want)
		}
	}
}

// The answers to a bad key: unauthorized, and once the client address has
// sent too many, unauthorized with a Retry-After (badKeyAnswer).
const (
	unauthorized = "401 unauthorized"
	limited      = "401 unauthorized with Retry-After"
)

// badKeyAnswer names the answer w holds to a request with a bad key.
func badKeyAnswer(w *httptest.ResponseRecorder) string {
	var body struct{ Error struct{ Code string } }
	json.Unmarshal(w.Body.Bytes(), &body)
	answer := fmt.Sprintf("%d %s", w.Code, body.Error.Code)
	if w.Header().Get("Retry-After") != "" {
		answer += " with Retry-After"
	}
	return answer
}
