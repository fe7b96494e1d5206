package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The dashboard in a real browser: Debian's chromium, headless, driven by
// chromedp against a real `serve` on 127.0.0.1. With DEMOSVC_SCREENSHOTS
// set to a directory, every page visited is also saved there as a PNG:
//
//	DEMOSVC_SCREENSHOTS=$PWD/docs/screenshots go test -run TestDashboardInABrowser .

// chromiumPath finds the browser, or skips the test when it is missing
// outside CI; in CI (CI=true) a missing browser fails.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed, and CI=true: the browser tests must run (.ci/run installs it)")
	}
	t.Skip("chromium is not installed: skipping the browser tests (apt-get install -y chromium; they never skip with CI=true)")
	return ""
}

// syncBuffer is a bytes buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs `demosvc serve` in this process on 127.0.0.1 and returns
// its base URL and what it printed.
func startServe(t *testing.T, env map[string]string) (string, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	env["DEMOSVC_DATA_DIR"] = dir
	stop, out, _ := serveInProcess(t, dir, env)
	t.Cleanup(func() {
		if code := stop(); code != 0 {
			t.Errorf("serve exited %d", code)
		}
	})
	url, _ := serverReady(dir)
	return url, out
}

// browser starts headless chromium with a fresh profile, kept off the
// network: it resolves no name and fetches nothing in the background.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,AutofillServerCommunication"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// page drives one browser tab against the dashboard at base.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string // screenshot directory; "" for none
}

func (p *page) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatal(err)
	}
}

// eval returns the value of a JavaScript expression in the page.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// query runs a query action and returns its value.
func query[T any](p *page, a chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		p.t.Fatal(err)
	}
	return v
}

// open loads path and waits for the page's main element.
func (p *page) open(path string) {
	p.t.Helper()
	p.run(chromedp.Navigate(p.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

// submit clicks sel and waits for the browser to be at a path matching
// want (a regexp on the path and query).
func (p *page) submit(sel, want string) {
	p.t.Helper()
	before := eval[float64](p, `performance.timeOrigin`)
	p.run(chromedp.Click(chromedp.CSS(sel)))
	p.waitFor(want, before)
}

// waitFor polls until a new document whose path matches want is loaded.
func (p *page) waitFor(want string, before float64) {
	p.t.Helper()
	re := regexp.MustCompile(want)
	deadline := time.Now().Add(20 * time.Second)
	for {
		state, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]any](
			`[performance.timeOrigin, location.pathname + location.search, document.readyState]`))
		var origin float64
		var loc, ready string
		if err == nil && len(state) == 3 {
			origin, _ = state[0].(float64)
			loc, _ = state[1].(string)
			ready, _ = state[2].(string)
		}
		if err == nil && origin != before && ready == "complete" && re.MatchString(loc) {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("waiting for a page at %s: at %q (ready %q, err %v)", want, loc, ready, err)
		}
		time.Sleep(25 * time.Millisecond) // polling interval, not synchronisation
	}
}

func (p *page) text(sel string) string {
	p.t.Helper()
	return strings.TrimSpace(query(p, chromedp.Text(chromedp.CSS(sel))))
}

func (p *page) value(sel string) string {
	p.t.Helper()
	return query(p, chromedp.Value(chromedp.CSS(sel)))
}

func (p *page) set(sel, v string) {
	p.t.Helper()
	p.run(chromedp.SetValue(chromedp.CSS(sel), v))
}

// body is the page's visible text, read by evaluating a script rather
// than through a DOM node: after a cross-origin navigation (the attacker's
// form in the CSRF case) chromedp can still hold the old document's node
// ids for a moment after the new page reports itself complete, and a
// query by node then fails with "No node with given id found".
func (p *page) body() string {
	p.t.Helper()
	return strings.TrimSpace(eval[string](p, `document.body.innerText`))
}

func (p *page) path() string {
	return eval[string](p, `location.pathname`)
}

// screenshot saves the page when DEMOSVC_SCREENSHOTS is set.
func (p *page) screenshot(name string) {
	p.t.Helper()
	if p.shot == "" {
		return
	}
	png := query(p, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(p.shot, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// sessionCookie returns the dashboard's session cookie as the browser
// holds it.
func (p *page) sessionCookie() *network.Cookie {
	p.t.Helper()
	res, err := chromedp.Call(p.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{p.base}})
	if err != nil {
		p.t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "demosvc_session" {
			return c
		}
	}
	return nil
}

// noRedirects is a Go client that shows redirects rather than following.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

var setupLinkRE = regexp.MustCompile(`http://127\.0\.0\.1:\d+(/setup/[A-Za-z0-9_-]{43})`)

const hostileName = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> "quoted" 'single' עברית RTL`

func TestDashboardInABrowser(t *testing.T) {
	ctx := browser(t)
	env := map[string]string{"DEMOSVC_DASHBOARD_SIGN_IN_PER_MINUTE": "3"}
	base, out := startServe(t, env)
	shots := os.Getenv("DEMOSVC_SCREENSHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &page{t: t, ctx: ctx, base: base, shot: shots}
	const adminEmail, password = "admin@example.com", "correct horse battery staple"

	t.Run("first-run setup link sets the password and signs in", func(t *testing.T) {
		p.t = t
		m := setupLinkRE.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("serve printed no setup link:\n%s", out.String())
		}
		p.open("/")
		if p.path() != "/login" {
			t.Fatalf("signed out, / is at %s, want /login", p.path())
		}
		// The dashboard takes every path but the API's own.
		for path, want := range map[string]int{"/v1/nope": 401, "/v1": 401, "/healthz": 200, "/readyz": 200, "/metrics": 200} {
			if r := get(t, base+path); r.StatusCode != want || strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
				t.Errorf("GET %s: %d %s, want %d from the API, not the dashboard", path, r.StatusCode, r.Header.Get("Content-Type"), want)
			}
		}
		p.screenshot("login")
		p.open(m[1])
		p.screenshot("setup")
		p.set("#email", adminEmail)
		p.set("#password", password)
		p.set("#confirm", password)
		p.submit(`main button[type=submit]`, `^/$`)
		if got := p.text("header .who"); !strings.Contains(got, adminEmail) || !strings.Contains(got, "admin") {
			t.Errorf("header says %q, want the admin's e-mail and role", got)
		}
		for _, item := range []string{"Overview", "Agents", "Sessions", "Contacts", "Webhooks", "Settings"} {
			if !strings.Contains(p.text("header nav"), item) {
				t.Errorf("navigation lacks %q", item)
			}
		}
		if !strings.Contains(p.body(), "agents active") {
			t.Error("the overview shows no counters")
		}
		p.screenshot("overview-first-run")
		c := p.sessionCookie()
		if c == nil || !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax {
			t.Errorf("session cookie %+v, want HttpOnly and SameSite=Lax", c)
		}
		p.open(m[1])
		if !strings.Contains(p.body(), "unknown, used or expired") {
			t.Error("the setup link works a second time")
		}
	})

	var keyID string
	t.Run("a key created under Settings, API Keys works on /v1 at once, and is refused once revoked", func(t *testing.T) {
		p.t = t
		p.open("/settings")
		p.screenshot("settings")
		p.open("/settings/api-keys")
		p.submit(`form[action="/settings/api-keys"] button`, `^/settings/api-keys$`)
		key := p.value("#new-key")
		if !regexp.MustCompile(`^sk_[A-Za-z0-9_-]{43}$`).MatchString(key) {
			t.Fatalf("new key %q", key)
		}
		if !strings.Contains(p.body(), "will not be shown again") || p.text("button.copy") != "Copy" {
			t.Error("the new key has no warning or no copy button")
		}
		p.screenshot("api-keys-created")
		if r := get(t, base+"/settings/api-keys", "Cookie", "demosvc_session="+p.sessionCookie().Value); r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q on the keys page, want no-store", r.Header.Get("Cache-Control"))
		}
		if r := get(t, base+"/v1/agents", "Authorization", "Bearer "+key); r.StatusCode != 200 {
			t.Fatalf("GET /v1/agents with the new key: %d", r.StatusCode)
		}
		row := p.text(`tbody tr:first-child`)
		if !strings.Contains(row, key[len(key)-4:]) || !strings.Contains(row, adminEmail) {
			t.Errorf("newest key row %q, want its last four and its creator", row)
		}
		href := query(p, chromedp.AttributeValue(chromedp.CSS(`tbody tr:first-child a[href$="/revoke"]`), "href")).Value
		keyID = strings.Split(strings.TrimPrefix(href, "/settings/api-keys/"), "/")[0]
		p.submit(`tbody tr:first-child a[href$="/revoke"]`, `/revoke$`)
		p.screenshot("api-keys-revoke")
		p.submit(`main form button.danger`, `^/settings/api-keys$`)
		if r := get(t, base+"/v1/agents", "Authorization", "Bearer "+key); r.StatusCode != 401 {
			t.Errorf("GET /v1/agents with the revoked key: %d, want 401", r.StatusCode)
		}
		if !strings.Contains(p.text(`tbody tr:first-child`), "revoked") {
			t.Error("the key list does not show the key revoked")
		}
		p.screenshot("api-keys")
		p.open("/settings/account")
		if got := p.text("dl.fields"); !strings.Contains(got, "pro") || !strings.Contains(got, "300 requests per minute") {
			t.Errorf("account page %q, want plan pro and its 300 requests per minute", got)
		}
		p.screenshot("account")
	})

	t.Run("a cross-origin form POST is refused", func(t *testing.T) {
		p.t = t
		attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><form id=f method=post action="%s/settings/api-keys"></form><script>document.getElementById("f").submit()</script>`, base)
		}))
		defer attacker.Close()
		keys := func() int {
			p.open("/settings/api-keys")
			return eval[int](p, `document.querySelectorAll("tbody tr").length`)
		}
		n := keys()
		origin := eval[float64](p, `performance.timeOrigin`)
		p.run(chromedp.Navigate(attacker.URL))
		p.waitFor(`^/settings/api-keys$`, origin)
		if body := p.body(); !strings.Contains(body, "403") || !strings.Contains(body, "another site") {
			t.Errorf("cross-origin POST answered %q, want the 403 page", body)
		}
		if got := keys(); got != n {
			t.Errorf("keys %d after a cross-origin POST, want %d", got, n)
		}
	})

	var agentPath string
	t.Run("an agent with a hostile name is created, edited and shown as text", func(t *testing.T) {
		p.t = t
		p.open("/agents/new")
		p.set("#name", hostileName)
		p.set("#sandbox_url", "javascript:alert(1)")
		p.set("#persona", "Warm, <b>brief</b>.")
		p.submit(`main form button[type=submit]`, `^/agents$`)
		if got := p.text("#sandbox_url-error"); !strings.Contains(got, "http or https") {
			t.Errorf("sandbox_url error %q", got)
		}
		if got := p.value("#name"); got != hostileName {
			t.Errorf("typed name not kept: %q", got)
		}
		p.screenshot("agent-new-errors")
		p.set("#sandbox_url", "https://sandbox.example.com/ava")
		p.submit(`main form button[type=submit]`, `^/agents/agt_`)
		agentPath = p.path()
		if got := p.text("#agent-name"); got != strings.TrimSpace(hostileName) {
			t.Errorf("agent name shown as %q, want the text %q", got, hostileName)
		}
		if eval[bool](p, `window.__pwned !== undefined`) {
			t.Error("the hostile name ran as script")
		}
		p.set("#persona", "Warm, brief, and patient.")
		p.set("#sandbox_url", "ftp://sandbox.example.com")
		p.submit(`form[action$="`+agentPath+`"] button[type=submit]`, `^/agents/agt_`)
		if got := p.text("#sandbox_url-error"); !strings.Contains(got, "http or https") {
			t.Errorf("sandbox_url error on edit %q", got)
		}
		p.set("#sandbox_url", "https://sandbox.example.com/ava2")
		if got := p.value("#persona"); got != "Warm, brief, and patient." {
			t.Errorf("typed persona not kept: %q", got)
		}
		p.set("#name", hostileName+" v2")
		p.submit(`form[action$="`+agentPath+`"] button[type=submit]`, `^/agents/agt_`)
		if got := p.value("#persona"); got != "Warm, brief, and patient." {
			t.Errorf("persona after save %q", got)
		}
		p.submit(`form[action$="/status"] button`, `^/agents/agt_`)
		if got := p.text("#agent-status"); got != "inactive" {
			t.Errorf("status after Deactivate %q", got)
		}
		p.screenshot("agent")
		p.open("/agents?status=inactive")
		if !strings.Contains(p.text("tbody"), "v2") {
			t.Error("the inactive filter does not list the agent")
		}
		p.open("/agents?status=active")
		if strings.Contains(p.text("tbody"), "v2") {
			t.Error("the active filter lists an inactive agent")
		}
		p.open("/agents")
		p.screenshot("agents")
		p.open("/agents/agt_01m7yzmhg079h0x8tcphavzkm3")
		if !strings.Contains(p.body(), "404") {
			t.Errorf("unknown agent: %q, want the 404 page", p.body())
		}
		p.screenshot("not-found")
	})

	t.Run("the log names the user as the actor of every change made in the dashboard", func(t *testing.T) {
		var logOut, logErr syncBuffer
		code := run(context.Background(), []string{"demosvc", "log", "--type", "agent.created", "--type", "agent.updated",
			"--type", "api_key.created", "--type", "api_key.revoked", "--type", "user.created"},
			func(k string) string { return env[k] }, nil, &logOut, &logErr)
		if code != 0 {
			t.Fatalf("demosvc log: %d %s", code, logErr.String())
		}
		lines := strings.Split(strings.TrimSpace(logOut.String()), "\n")
		if len(lines) < 7 {
			t.Fatalf("%d events, want the key created and revoked, the agent created and updated:\n%s", len(lines), logOut.String())
		}
		for i, l := range lines {
			bootstrapKey := i == 0 && strings.Contains(l, `"type":"api_key.created"`)
			if !bootstrapKey && !regexp.MustCompile(`"actor":"usr_[0-9a-z]{26}"`).MatchString(l) {
				t.Errorf("event not caused by the signed-in user: %s", l)
			}
		}
	})

	t.Run("a viewer cannot create keys", func(t *testing.T) {
		p.t = t
		p.open("/settings/users")
		p.set("#email", "viewer@example.com")
		p.submit(`main form button[type=submit]`, `^/settings/users$`)
		link := p.value("#invite-link")
		p.screenshot("users")
		p.submit(`header form button`, `^/login$`)
		p.run(chromedp.Navigate(link), chromedp.WaitReady(chromedp.CSS("main")))
		p.set("#password", password)
		p.set("#confirm", password)
		p.submit(`main button[type=submit]`, `^/$`)
		p.open("/settings/api-keys")
		if eval[int](p, `document.querySelectorAll('form[action="/settings/api-keys"]').length`) != 0 {
			t.Error("a viewer is offered Create key")
		}
		// The POST a viewer's browser could still send: a 403 page.
		origin := eval[float64](p, `performance.timeOrigin`)
		eval[bool](p, `(() => { const f = document.createElement("form"); f.method = "post"; f.action = "/settings/api-keys"; document.body.append(f); f.submit(); return true })()`)
		p.waitFor(`^/settings/api-keys$`, origin)
		if body := p.body(); !strings.Contains(body, "403") || !strings.Contains(body, "viewer") {
			t.Errorf("a viewer's POST answered %q, want the 403 page", body)
		}
		p.screenshot("forbidden")
		p.open("/settings/api-keys/" + keyID + "/revoke")
		if !strings.Contains(p.body(), "403") {
			t.Error("a viewer reaches the revoke confirmation")
		}
		p.open(agentPath)
		if forms := eval[int](p, `document.querySelectorAll("main form").length`); forms != 0 {
			t.Errorf("a viewer sees %d forms on an agent", forms)
		}
	})

	t.Run("sign-out ends the session", func(t *testing.T) {
		p.t = t
		old := p.sessionCookie().Value
		if r := get(t, base+"/agents", "Cookie", "demosvc_session="+old); r.StatusCode != 200 {
			t.Fatalf("the session does not work before sign-out: %d", r.StatusCode)
		}
		p.open("/agents")
		p.submit(`header form button`, `^/login$`)
		r := get(t, base+"/agents", "Cookie", "demosvc_session="+old)
		if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/login") {
			t.Errorf("the old cookie after sign-out: %d to %q, want 303 to /login", r.StatusCode, r.Header.Get("Location"))
		}
		p.open("/settings/api-keys")
		if p.path() != "/login" {
			t.Errorf("signed out, the keys page is at %s", p.path())
		}
		// Signing in again comes back to the page asked for.
		p.set("#email", adminEmail)
		p.set("#password", password)
		p.submit(`main button[type=submit]`, `^/settings/api-keys$`)
		p.submit(`header form button`, `^/login$`)
	})

	t.Run("sign-in is limited", func(t *testing.T) {
		p.t = t
		p.open("/login")
		for i := 1; ; i++ {
			p.set("#email", adminEmail)
			p.set("#password", "not the password")
			p.submit(`main button[type=submit]`, `^/login$`)
			body := p.body()
			if strings.Contains(body, "Too many sign-in attempts") {
				if i < 2 {
					t.Errorf("limited at attempt %d", i)
				}
				p.screenshot("login-limited")
				break
			}
			if !strings.Contains(body, "Wrong e-mail or password.") {
				t.Fatalf("attempt %d: %q, want the generic refusal", i, body)
			}
			// A bucket of 3 refills one attempt per 20 s; attempts, even
			// slow ones under -race, drain it long before 10.
			if i > 10 {
				t.Fatal("10 wrong passwords were not limited")
			}
		}
	})
}

// TestDashboardDisabled needs no browser: with dashboard.enabled off, serve
// prints no setup link and every path outside the API is its JSON 404.
func TestDashboardDisabled(t *testing.T) {
	base, out := startServe(t, map[string]string{"DEMOSVC_DASHBOARD_ENABLED": "false"})
	if strings.Contains(out.String(), "/setup/") {
		t.Errorf("serve printed a setup link with the dashboard off:\n%s", out.String())
	}
	r := get(t, base+"/login")
	if r.StatusCode != http.StatusNotFound || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /login: %d %s, want the API's JSON 404", r.StatusCode, r.Header.Get("Content-Type"))
	}
}
