package dashboard

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"demosvc/config"
	"demosvc/eventlog"
	"demosvc/projections"
)

// testClock is an injected clock the test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openState opens real projections over a real Pebble in a temp dir, with
// one account, whose id it returns.
func openState(t *testing.T, clock func() time.Time) (*projections.Projections, string) {
	t.Helper()
	old := projections.PasswordParams
	projections.PasswordParams = projections.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}
	t.Cleanup(func() { projections.PasswordParams = old })
	store, err := eventlog.OpenStore(t.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(clock)})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := eventlog.NewSealer(make([]byte, eventlog.MasterKeySize), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	opts := projections.DefaultOptions
	opts.Sealer = sealer
	p, err := projections.Open(log, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); log.Close(); store.Close() })
	acc, err := p.CreateAccount(context.Background(), "cli", "acme", projections.PlanPro, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p, acc.ID
}

// signIn creates a user with a password and returns a fresh session token.
func signIn(t *testing.T, p *projections.Projections, account, email string, now time.Time, maxAge time.Duration) string {
	t.Helper()
	ctx := context.Background()
	_, link, err := p.CreateUser(ctx, "cli", account, email, projections.RoleAdmin, now)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := p.CompleteSetup(ctx, link.Token, "", "a long password", projections.ClientInfo{}, now, maxAge)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSessionStore(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	p, acc := openState(t, clock.now)
	const idle, max = 12 * time.Hour, 7 * 24 * time.Hour

	t.Run("use within the idle timeout keeps a session until its maximum age", func(t *testing.T) {
		s := NewSessions(p, clock.now, idle, max)
		tok := signIn(t, p, acc, "a@example.com", clock.now(), max)
		start := clock.now()
		for clock.now().Sub(start) < max-11*time.Hour {
			if _, ok := s.Lookup(tok, time.Time{}); !ok {
				t.Fatalf("session ended after %s of regular use", clock.now().Sub(start))
			}
			clock.add(11 * time.Hour)
		}
		clock.t = start.Add(max)
		if _, ok := s.Lookup(tok, time.Time{}); ok {
			t.Error("a session in use outlived its absolute maximum age")
		}
	})

	t.Run("a session unused for the idle timeout ends", func(t *testing.T) {
		s := NewSessions(p, clock.now, idle, max)
		tok := signIn(t, p, acc, "b@example.com", clock.now(), max)
		clock.add(idle - time.Second)
		if _, ok := s.Lookup(tok, time.Time{}); !ok {
			t.Fatal("a session ended before its idle timeout")
		}
		clock.add(idle)
		if _, ok := s.Lookup(tok, time.Time{}); ok {
			t.Error("a session unused for the idle timeout still works")
		}
	})

	t.Run("after a restart last use counts from sign-in", func(t *testing.T) {
		tok := signIn(t, p, acc, "c@example.com", clock.now(), max)
		first := NewSessions(p, clock.now, idle, max)
		clock.add(10 * time.Hour)
		if _, ok := first.Lookup(tok, time.Time{}); !ok {
			t.Fatal("session ended early")
		}
		clock.add(3 * time.Hour)
		restarted := NewSessions(p, clock.now, idle, max) // forgets the use at 10 h
		if _, ok := restarted.Lookup(tok, time.Time{}); ok {
			t.Error("a restart extended a session past its idle timeout from sign-in")
		}
	})

	t.Run("a lower maximum age ends the sessions already open", func(t *testing.T) {
		tok := signIn(t, p, acc, "e@example.com", clock.now(), max)
		clock.add(2 * time.Hour)
		if _, ok := NewSessions(p, clock.now, idle, max).Lookup(tok, time.Time{}); !ok {
			t.Fatal("session ended early")
		}
		if _, ok := NewSessions(p, clock.now, idle, time.Hour).Lookup(tok, time.Time{}); ok {
			t.Error("a session signed in 2 h ago outlived a maximum age lowered to 1 h")
		}
	})

	t.Run("sign out and unknown tokens", func(t *testing.T) {
		s := NewSessions(p, clock.now, idle, max)
		tok := signIn(t, p, acc, "d@example.com", clock.now(), max)
		if err := p.SignOut(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		for _, tk := range []string{tok, "", "nope"} {
			if _, ok := s.Lookup(tk, time.Time{}); ok {
				t.Errorf("Lookup(%q) found a session", tk)
			}
		}
	})
}

// Two nodes of a cluster each keep the last uses they saw; a session used
// on one stays live on the other (a write the first forwards to it, or the
// next page after a failover) through the signed use cookie, which cannot
// be forged, moved to another session, or dated in the future.
func TestALastUseSeenOnAnotherNodeKeepsTheSession(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	p, acc := openState(t, clock.now)
	cfg := config.Default()
	cfg.Dashboard.SessionIdle = 30 * time.Minute
	key := []byte("a key every node derives alike..")
	node := func() *httptest.Server {
		srv := httptest.NewServer(New(Deps{State: p, Config: cfg, Clock: clock.now, UseKey: key}))
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := node(), node()
	tok := signIn(t, p, acc, "a@example.com", clock.now(), cfg.Dashboard.SessionMax)
	other := signIn(t, p, acc, "o@example.com", clock.now(), cfg.Dashboard.SessionMax)
	get := func(srv *httptest.Server, token string, used *http.Cookie) (*http.Response, *http.Cookie) {
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.AddCookie(&http.Cookie{Name: "demosvc_session", Value: token})
		if used != nil {
			req.AddCookie(used)
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "demosvc_session_used" {
				return resp, c
			}
		}
		return resp, nil
	}
	// Used on a every 20 minutes for an hour: live there.
	var used *http.Cookie
	for range 3 {
		clock.add(20 * time.Minute)
		resp, c := get(a, tok, used)
		if resp.StatusCode != http.StatusOK || c == nil || !c.HttpOnly {
			t.Fatalf("a page on a: %d, use cookie %v", resp.StatusCode, c)
		}
		used = c
	}
	clock.add(10 * time.Minute)
	// b saw none of those uses: from sign-in, 70 minutes idle.
	if resp, _ := get(b, tok, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("b without the use cookie: %d; want a redirect to sign in", resp.StatusCode)
	}
	if resp, _ := get(b, tok, used); resp.StatusCode != http.StatusOK {
		t.Errorf("b with the use cookie a set 10 minutes ago: %d; want the page", resp.StatusCode)
	}
	at, _, _ := strings.Cut(used.Value, ".")
	forged := map[string]*http.Cookie{
		"a later time under the same MAC": {Name: used.Name, Value: fmt.Sprint(clock.now().Unix()) + used.Value[len(at):]},
		"a MAC of nothing":                {Name: used.Name, Value: at + "."},
		"not a time":                      {Name: used.Name, Value: "x." + used.Value[len(at)+1:]},
	}
	c := node() // a third node, which saw nothing either
	for what, ck := range forged {
		if resp, _ := get(c, tok, ck); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("use cookie with %s: %d; want a redirect to sign in", what, resp.StatusCode)
		}
	}
	if resp, _ := get(c, other, used); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("another session's use cookie: %d; want a redirect to sign in", resp.StatusCode)
	}
	// A node without the key goes by what it saw.
	nokey := httptest.NewServer(New(Deps{State: p, Config: cfg, Clock: clock.now}))
	defer nokey.Close()
	if resp, _ := get(nokey, tok, used); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a node without a use key took the cookie: %d", resp.StatusCode)
	}
}
