package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"demosvc/config"
	"demosvc/projections"
)

// server serves a dashboard over real projections on 127.0.0.1.
func server(t *testing.T, cfg *config.Config) (*httptest.Server, *projections.Projections, string, *testClock) {
	t.Helper()
	clock := &testClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	p, acc := openState(t, clock.now)
	srv := httptest.NewServer(New(Deps{State: p, Config: cfg, Clock: clock.now}))
	t.Cleanup(srv.Close)
	return srv, p, acc, clock
}

// do sends a request as a same-origin browser would, with the session
// cookie when token is set, and does not follow redirects.
func do(t *testing.T, srv *httptest.Server, method, path, token string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "demosvc_session", Value: token})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestAnotherAccountsIDsAreNotFound(t *testing.T) {
	srv, p, acc, clock := server(t, config.Default())
	ctx := context.Background()
	tok := signIn(t, p, acc, "a@example.com", clock.now(), time.Hour)
	other, err := p.CreateAccount(ctx, "cli", "other", projections.PlanPro, 0)
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.CreateAgent(ctx, projections.Principal{Account: other, KeyID: "cli"},
		projections.AgentInput{Name: "theirs", SandboxURL: "https://s.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agentID := v.(projections.AgentView).ID
	key, err := p.CreateKey(ctx, "cli", other.ID)
	if err != nil {
		t.Fatal(err)
	}
	theirUser, _, err := p.CreateUser(ctx, "cli", other.ID, "b@example.com", projections.RoleViewer, clock.now())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/agents/" + agentID},
		{"POST", "/agents/" + agentID},
		{"POST", "/agents/" + agentID + "/status"},
		{"GET", "/settings/api-keys/" + key.ID + "/revoke"},
		{"POST", "/settings/api-keys/" + key.ID + "/revoke"},
		{"GET", "/settings/users/" + theirUser.ID + "/disable"},
		{"POST", "/settings/users/" + theirUser.ID + "/disable"},
		{"GET", "/agents/agt_nope"},
		{"GET", "/no/such/page"},
	} {
		form := url.Values{}
		if c.method == "GET" {
			form = nil
		} else {
			form.Set("name", "mine now")
			form.Set("status", "inactive")
		}
		resp, body := do(t, srv, c.method, c.path, tok, form)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "404") {
			t.Errorf("%s %s: %d, want the 404 page", c.method, c.path, resp.StatusCode)
		}
	}
	if a, _ := p.Agent(other.ID, agentID); a.Name != "theirs" || a.Status != "active" {
		t.Errorf("their agent changed: %+v", a)
	}
	if u, _ := p.UserByID(theirUser.ID); u.Disabled {
		t.Error("their user was disabled")
	}
	for _, k := range p.Keys(other.ID) {
		if k.RevokedAt != nil {
			t.Error("their key was revoked")
		}
	}
}

func TestHeadersAndCookies(t *testing.T) {
	t.Run("every page has the CSP, no-store and same-origin referrers", func(t *testing.T) {
		srv, _, _, _ := server(t, config.Default())
		for _, path := range []string{"/login", "/setup/nope", "/"} {
			resp, _ := do(t, srv, "GET", path, "", nil)
			h := resp.Header
			if h.Get("Content-Security-Policy") != csp || !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s: CSP %q", path, h.Get("Content-Security-Policy"))
			}
			if h.Get("Referrer-Policy") != "same-origin" || h.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: Referrer-Policy %q, Cache-Control %q", path, h.Get("Referrer-Policy"), h.Get("Cache-Control"))
			}
		}
	})

	t.Run("a signed-out GET goes to /login and back", func(t *testing.T) {
		srv, _, _, _ := server(t, config.Default())
		resp, _ := do(t, srv, "GET", "/agents?status=active", "", nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/login?next=%2Fagents%3Fstatus%3Dactive" {
			t.Errorf("%d to %q", resp.StatusCode, loc)
		}
	})

	t.Run("after sign-in, next never leads to another site", func(t *testing.T) {
		srv, p, acc, clock := server(t, config.Default())
		tok := signIn(t, p, acc, "a@example.com", clock.now(), time.Hour)
		for next, want := range map[string]string{
			"//evil.example.com/": "/", `/\evil.example.com`: "/", `/./\evil.example.com`: "/",
			`/x/../\evil.example.com/path`: "/", "/./%5Cevil.example.com": "/", "https://evil.example.com/": "/",
			"agents": "/", "/agents?status=active": "/agents?status=active",
		} {
			resp, _ := do(t, srv, "POST", "/login", "", url.Values{"email": {"a@example.com"}, "password": {"a long password"}, "next": {next}})
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != want {
				t.Errorf("POST /login next=%q: %d to %q, want 303 to %q", next, resp.StatusCode, loc, want)
			}
			// Signed in already, GET /login goes straight to next.
			resp, _ = do(t, srv, "GET", "/login?next="+url.QueryEscape(next), tok, nil)
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != want {
				t.Errorf("GET /login?next=%q signed in: %d to %q, want 303 to %q", next, resp.StatusCode, loc, want)
			}
		}
	})

	for _, tc := range []struct {
		name      string
		secure    bool // dashboard.secure_cookies
		publicURL string
	}{{"secure_cookies=false", false, ""}, {"secure_cookies=true", true, ""}, {"an https public_url", false, "HTTPS://demos.example.com/"}} {
		secure := tc.secure || tc.publicURL != ""
		t.Run("sign-in cookie, "+tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Dashboard.SecureCookies, cfg.Dashboard.PublicURL = tc.secure, tc.publicURL
			srv, p, acc, clock := server(t, cfg)
			signIn(t, p, acc, "a@example.com", clock.now(), time.Hour)
			resp, _ := do(t, srv, "POST", "/login", "", url.Values{"email": {"a@example.com"}, "password": {"a long password"}, "next": {"//evil.example.com/"}})
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
				t.Errorf("sign in: %d to %q, want 303 to / (never another site)", resp.StatusCode, resp.Header.Get("Location"))
			}
			cookies := resp.Cookies()
			if len(cookies) != 1 {
				t.Fatalf("cookies %v", cookies)
			}
			c := cookies[0]
			wantName := map[bool]string{false: "demosvc_session", true: "__Host-demosvc_session"}[secure]
			if c.Name != wantName || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure != secure || c.Path != "/" {
				t.Errorf("cookie %+v, want %s, HttpOnly, SameSite=Lax, Secure=%v, Path=/", c, wantName, secure)
			}
			if _, ok := p.Session(c.Value, clock.now()); !ok {
				t.Error("the cookie's token is not a live session")
			}
		})
	}

	t.Run("a wrong password and an unknown e-mail get the same answer", func(t *testing.T) {
		srv, p, acc, clock := server(t, config.Default())
		signIn(t, p, acc, "a@example.com", clock.now(), time.Hour)
		r1, b1 := do(t, srv, "POST", "/login", "", url.Values{"email": {"a@example.com"}, "password": {"not it at all"}})
		r2, b2 := do(t, srv, "POST", "/login", "", url.Values{"email": {"zz@example.com"}, "password": {"not it at all"}})
		if r1.StatusCode != r2.StatusCode || !strings.Contains(b1, "Wrong e-mail or password.") ||
			strings.ReplaceAll(b1, "a@example.com", "") != strings.ReplaceAll(b2, "zz@example.com", "") {
			t.Errorf("answers differ: %d and %d", r1.StatusCode, r2.StatusCode)
		}
	})
}

func TestAgentsListPagesNewestFirst(t *testing.T) {
	srv, p, acc, clock := server(t, config.Default())
	tok := signIn(t, p, acc, "a@example.com", clock.now(), time.Hour)
	var accounts projections.Account
	for _, a := range p.Accounts() {
		if a.ID == acc {
			accounts = a
		}
	}
	for i := range agentsPerPage + 5 {
		if _, err := p.CreateAgent(context.Background(), projections.Principal{Account: accounts, KeyID: "cli"},
			projections.AgentInput{Name: "agent-" + string(rune('A'+i)), SandboxURL: "https://s.example.com"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, first := do(t, srv, "GET", "/agents", tok, nil)
	if n := strings.Count(first, `<tr><td><a href="/agents/agt_`); n != agentsPerPage {
		t.Fatalf("first page has %d agents, want %d", n, agentsPerPage)
	}
	if !strings.Contains(first, "agent-Y") || strings.Contains(first, "agent-E<") {
		t.Error("the first page is not the newest agents")
	}
	i := strings.Index(first, `href="/agents?after=`)
	if i < 0 {
		t.Fatalf("no next page link in %s", first[strings.Index(first, "</table>"):])
	}
	next := first[i+len(`href="`):]
	next = strings.ReplaceAll(next[:strings.IndexByte(next, '"')], "&amp;", "&")
	_, second := do(t, srv, "GET", next, tok, nil)
	if n := strings.Count(second, `<tr><td><a href="/agents/agt_`); n != 5 || !strings.Contains(second, "agent-A<") {
		t.Errorf("second page has %d agents, want the 5 oldest", n)
	}
	if strings.Contains(second, "Next page") {
		t.Error("the last page links to a next one")
	}
	if resp, _ := do(t, srv, "GET", "/agents?status=gone", tok, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown status filter: %d, want 400", resp.StatusCode)
	}
}

// TestSignInIsLimitedPerAddressAndPerEmail uses the injected clock, which
// stands still: no attempt is refilled during the test.
func TestSignInIsLimitedPerAddressAndPerEmail(t *testing.T) {
	cfg := config.Default()
	cfg.Dashboard.SignInPerMinute = 3
	clock := &testClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	p, acc := openState(t, clock.now)
	db := New(Deps{State: p, Config: cfg, Clock: clock.now})
	signIn(t, p, acc, "a@example.com", clock.now(), time.Hour)
	login := func(addr, email, password string) int {
		form := url.Values{"email": {email}, "password": {password}}
		req := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr + ":4000"
		rec := httptest.NewRecorder()
		db.ServeHTTP(rec, req)
		return rec.Code
	}
	t.Run("per address, whatever the e-mail, and the right password too", func(t *testing.T) {
		for i, email := range []string{"x@example.com", "y@example.com", "z@example.com"} {
			if got := login("10.0.0.1", email, "wrong password!"); got != http.StatusUnauthorized {
				t.Fatalf("attempt %d: %d, want 401", i+1, got)
			}
		}
		if got := login("10.0.0.1", "a@example.com", "a long password"); got != http.StatusTooManyRequests {
			t.Errorf("4th attempt from one address: %d, want 429", got)
		}
	})
	t.Run("per e-mail, whatever the address, at ten times an address's limit", func(t *testing.T) {
		// One address at its limit never locks the owner out.
		for i := range 4 {
			want := http.StatusUnauthorized
			if i == 3 {
				want = http.StatusTooManyRequests // the address's own limit
			}
			if got := login("10.0.2.1", "a@example.com", "wrong password!"); got != want {
				t.Fatalf("attempt %d from one address: %d, want %d", i+1, got, want)
			}
		}
		for i := range 3*emailLimitFactor - 3 {
			if got := login(fmt.Sprintf("10.0.2.%d", 2+i/3), "A@example.com", "wrong password!"); got != http.StatusUnauthorized {
				t.Fatalf("attempt %d on one e-mail: %d, want 401", i+4, got)
			}
		}
		if got := login("10.0.0.5", "a@example.com", "a long password"); got != http.StatusTooManyRequests {
			t.Errorf("attempt %d on one e-mail: %d, want 429", 3*emailLimitFactor+1, got)
		}
	})
	t.Run("an IPv6 client counts by its /64, as one host often has all of it", func(t *testing.T) {
		for i := 1; i <= 3; i++ {
			if got := login(fmt.Sprintf("[2001:db8::%x]", i), fmt.Sprintf("u%d@example.com", i), "wrong password!"); got != http.StatusUnauthorized {
				t.Fatalf("attempt %d: %d, want 401", i, got)
			}
		}
		if got := login("[2001:db8::ffff:1]", "u4@example.com", "wrong password!"); got != http.StatusTooManyRequests {
			t.Errorf("4th attempt from one /64: %d, want 429", got)
		}
		if got := login("[2001:db8:0:1::1]", "u5@example.com", "wrong password!"); got != http.StatusUnauthorized {
			t.Errorf("the next /64: %d, want 401 (its own budget)", got)
		}
	})
	t.Run("an e-mail longer than any user's is refused and keeps nothing", func(t *testing.T) {
		keys := db.byEmail.Len()
		long := strings.Repeat("a", 200<<10) + "@example.com"
		if got := login("10.0.1.1", long, "wrong password!"); got != http.StatusUnauthorized {
			t.Errorf("a 200 KiB e-mail: %d, want 401", got)
		}
		if n := db.byEmail.Len(); n != keys {
			t.Errorf("the per-e-mail limiter holds %d keys after a 200 KiB e-mail, had %d: each would keep its 200 KiB", n, keys)
		}
	})
	t.Run("a minute later the owner signs in", func(t *testing.T) {
		clock.add(time.Minute)
		if got := login("10.0.0.6", "a@example.com", "a long password"); got != http.StatusSeeOther {
			t.Errorf("after a minute: %d, want 303", got)
		}
	})
}

func TestSetupFormKeepsWhatWasTypedAndSaysWhatIsWrong(t *testing.T) {
	srv, p, acc, clock := server(t, config.Default())
	link, err := p.IssueSetupLink(context.Background(), "cli", acc, "", clock.now())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ email, password, confirm, field, msg string }{
		{"pat@example.com", "a long password", "a long passwore", "confirm-error", "The two passwords differ."},
		{"pat@example.com", "short", "short", "password-error", "must be at least 12 characters"},
		{"not an e-mail", "a long password", "a long password", "email-error", "must be an e-mail address"},
	} {
		resp, body := do(t, srv, "POST", link.Path(), "", url.Values{"email": {c.email}, "password": {c.password}, "confirm": {c.confirm}})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `id="`+c.field+`">`+c.msg) {
			t.Errorf("%+v: %d, want 422 with %q under its field", c, resp.StatusCode, c.msg)
		}
		if !strings.Contains(body, `value="`+c.email+`"`) {
			t.Errorf("%+v: the typed e-mail is not kept", c)
		}
	}
	if len(p.Users(acc)) != 0 {
		t.Error("a refused setup created a user")
	}
	resp, _ := do(t, srv, "POST", link.Path(), "", url.Values{"email": {"pat@example.com"}, "password": {"a long password"}, "confirm": {"a long password"}})
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("setup: %d with cookies %v", resp.StatusCode, resp.Cookies())
	}
	users := p.Users(acc)
	if len(users) != 1 || users[0].Email != "pat@example.com" || users[0].Role != projections.RoleAdmin {
		t.Errorf("users %+v, want pat as admin", users)
	}
}

// TestASetupLinkIsNeverLogged: a setup link's path is its token, which
// sets an account's first password. A setup that fails for the service's
// reasons is logged by its route, not its path.
func TestASetupLinkIsNeverLogged(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	p, acc := openState(t, clock.now)
	var logs bytes.Buffer
	db := New(Deps{State: p, Config: config.Default(), Clock: clock.now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	link, err := p.IssueSetupLink(context.Background(), "cli", acc, "", clock.now())
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"email": {"pat@example.com"}, "password": {"a long password"}, "confirm": {"a long password"}}
	r := httptest.NewRequest("POST", link.Path(), strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	p.Close() // the setup's write fails: the log is closed
	w := httptest.NewRecorder()
	db.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(logs.String(), `msg="dashboard: command failed" route="POST /setup/{token}"`) {
		t.Fatalf("%d, log %q; want 503 and the failure logged with its route", w.Code, logs.String())
	}
	if strings.Contains(logs.String(), link.Token) {
		t.Errorf("the setup token is in the log:\n%s", logs.String())
	}
}
