package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Dashboard II in a real browser: a scenario driven through the API
// (sessions through every transition, a hot lead, a meeting, a webhook to
// a receiver on 127.0.0.1 that fails then succeeds), then what the pages
// show of it. With DEMOSVC_SCREENSHOTS set, every page is saved there:
//
//	DEMOSVC_SCREENSHOTS=$PWD/docs/screenshots go test -run 'TestDashboard' .

// apiClient calls /v1 with a key.
type apiClient struct {
	t    *testing.T
	base string
	key  string
}

func (c apiClient) call(method, path string, body any) map[string]any {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	_ = json.Unmarshal(b, &out)
	return out
}

// flakyReceiver answers 500 to the contact.created of one e-mail while
// failing is set, 500 to everything while down is set (an outage), 200
// to everything else, and keeps what it received.
type flakyReceiver struct {
	*httptest.Server
	failing atomic.Bool
	down    atomic.Bool
	mu      sync.Mutex
	bodies  []string
	codes   []int
}

func newFlakyReceiver(t *testing.T, failEmail string) *flakyReceiver {
	rv := &flakyReceiver{}
	rv.failing.Store(true)
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		code := http.StatusOK
		if rv.down.Load() || rv.failing.Load() && bytes.Contains(b, []byte(`"event":"contact.created"`)) && bytes.Contains(b, []byte(failEmail)) {
			code = http.StatusInternalServerError
		}
		rv.mu.Lock()
		rv.bodies, rv.codes = append(rv.bodies, string(b)), append(rv.codes, code)
		rv.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(rv.Close)
	return rv
}

// got counts the requests received whose body holds every one of parts,
// answered with code.
func (rv *flakyReceiver) got(code int, parts ...string) int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	n := 0
	for i, b := range rv.bodies {
		ok := rv.codes[i] == code
		for _, p := range parts {
			ok = ok && strings.Contains(b, p)
		}
		if ok {
			n++
		}
	}
	return n
}

// poll waits until cond holds, failing the test after a deadline.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

var bootstrapKeyRE = regexp.MustCompile(`\n(sk_[A-Za-z0-9_-]{43})\n`)

func TestDashboardPagesInABrowser(t *testing.T) {
	ctx := browser(t)
	base, out := startServe(t, map[string]string{
		"DEMOSVC_DELIVERY_ALLOW_PRIVATE_NETWORKS": "true",
		"DEMOSVC_DELIVERY_MAX_RETRIES":            "1",
		"DEMOSVC_DELIVERY_BACKOFF":                "50ms",
	})
	shots := os.Getenv("DEMOSVC_SCREENSHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &page{t: t, ctx: ctx, base: base, shot: shots}
	const adminEmail, password = "ops@example.com", "correct horse battery staple"
	m := setupLinkRE.FindStringSubmatch(out.String())
	k := bootstrapKeyRE.FindStringSubmatch(out.String())
	if m == nil || k == nil {
		t.Fatalf("serve printed no setup link or key:\n%s", out.String())
	}
	api := apiClient{t: t, base: base, key: k[1]}
	p.open(m[1])
	p.set("#email", adminEmail)
	p.set("#password", password)
	p.set("#confirm", password)
	p.submit(`main button[type=submit]`, `^/$`)

	const hotEmail, hostileEmail = "dana@globex.example", "o'neil&x=1{y}@example.com"
	rv := newFlakyReceiver(t, hotEmail)

	var webhookID string
	t.Run("a webhook registered from the page shows its secret once", func(t *testing.T) {
		p.t = t
		p.open("/webhooks/new")
		p.screenshot("webhook-new")
		p.set("#url", rv.URL+"/crm")
		p.run(chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('input[name=events]').forEach(function (c) { c.checked = true })`))
		p.submit(`main form button[type=submit]`, `^/webhooks$`)
		secret := p.value("#new-secret")
		if !strings.HasPrefix(secret, "whsec_") || !strings.Contains(p.body(), "will not be shown again") {
			t.Fatalf("secret %q, or no warning", secret)
		}
		p.screenshot("webhook-created")
		href := query(p, chromedp.AttributeValue(chromedp.CSS(`main a[href^="/webhooks/wh_"]`), "href")).Value
		webhookID = strings.TrimPrefix(href, "/webhooks/")
		p.open(href)
		if strings.Contains(p.body(), secret) {
			t.Error("the webhook's page shows its secret again")
		}
	})

	// The scenario, through the API with the bootstrap key.
	agent := api.call("POST", "/v1/agents", map[string]any{"name": "Ava", "sandbox_url": "https://sandbox.example.com/ava"})["id"].(string)
	start := func(name, email string) string {
		return api.call("POST", "/v1/sessions", map[string]any{"agent_id": agent,
			"contact": map[string]any{"name": name, "email": email, "company": "Globex"}})["id"].(string)
	}
	hot := start("Dana Scully", hotEmail)
	api.call("POST", "/v1/sessions/"+hot+"/progress", map[string]any{"intent_score": 55, "duration_seconds": 300})
	api.call("POST", "/v1/sessions/"+hot+"/progress", map[string]any{"intent_score": 88,
		"signals": map[string]any{"interest": 90, "objections": 10, "buying_signals": 70}})
	api.call("POST", "/v1/sessions/"+hot+"/complete", map[string]any{"intent_score": 92, "duration_seconds": 1260,
		"signals": map[string]any{"interest": 95, "objections": 5, "buying_signals": 80}, "replay_url": "https://replay.example.com/r/1"})
	api.call("POST", "/v1/sessions/"+hot+"/meeting", map[string]any{"scheduled_at": "2026-12-01T15:00:00Z", "calendar_link": "https://cal.example.com/m/1"})
	gone := start("Fox Mulder", "fox@example.com")
	api.call("POST", "/v1/sessions/"+gone+"/abandon", map[string]any{"intent_score": 20})
	start("Walter Skinner", "walter@example.com") // stays in progress
	hostile := start(hostileName, hostileEmail)
	api.call("POST", "/v1/sessions/"+hostile+"/complete", map[string]any{"intent_score": 31, "duration_seconds": 60,
		"signals": map[string]any{"interest": 30, "objections": 40, "buying_signals": 10}, "replay_url": `https://replay.example.com/r/2?x="><script>window.__pwned=5</script>`})

	// The first contact.created fails twice (max_retries 1) and is failed;
	// the rest succeed.
	poll(t, "the failing delivery's two attempts and the others' successes", func() bool {
		return rv.got(500, "contact.created", hotEmail) == 2 && rv.got(200, "meeting.booked") == 1 && rv.got(200, "demo.abandoned") == 1 &&
			rv.got(200, "demo.completed") == 2 && rv.got(200, "lead.hot") == 1 &&
			rv.got(200, "contact.created") == 3
	})
	rv.failing.Store(false)

	t.Run("the overview counts what happened, in counters and charts", func(t *testing.T) {
		p.t = t
		p.open("/")
		for sel, want := range map[string]string{"#c-agents": "1", "#c-in-progress": "1", "#c-hot": "1", "#c-meetings": "1",
			"#c-rate": "66%", "#completed-today": "2", "#abandoned-today": "1", "#completed-month": "2", "#abandoned-week": "1"} {
			if got := p.text(sel); got != want {
				t.Errorf("%s shows %q, want %q", sel, got, want)
			}
		}
		// The per-day chart's numbers: today's row (the last), as the
		// table for screen readers and the bars' values.
		if got := eval[string](p, `Array.from(document.querySelectorAll('#per-day-table tbody tr:last-child td')).map(function (td) { return td.textContent }).join(",")`); got != "2,1,3" {
			t.Errorf("today's row of the per-day chart: %q, want completed 2, abandoned 1, total 3", got)
		}
		if got := eval[string](p, `Array.from(document.querySelectorAll('figure svg.plot rect.bar[data-series]')).filter(function (r) { return r.closest('figure').querySelector('#per-day-table') }).map(function (r) { return r.dataset.series + "=" + r.dataset.value }).join(",")`); got != "completed=2,abandoned=1" {
			t.Errorf("per-day bars %q, want completed=2,abandoned=1", got)
		}
		if got := eval[string](p, `Array.from(document.querySelectorAll('#scores-table tbody td')).map(function (td) { return td.textContent }).join(",")`); got != "0,0,0,1,0,0,0,0,0,1" {
			t.Errorf("score distribution %q, want one in 30–39 and one in 90–100", got)
		}
		if got := p.text("#top-agents tbody"); !strings.Contains(got, "Ava") || !strings.Contains(got, "1") {
			t.Errorf("top agents %q", got)
		}
		if eval[int](p, `document.querySelectorAll('svg.plot[role=img][aria-labelledby]').length`) != 2 {
			t.Error("the charts are not images labelled for screen readers")
		}
		p.screenshot("overview")
	})

	t.Run("sessions list and filters", func(t *testing.T) {
		p.t = t
		p.open("/sessions")
		if n := eval[int](p, `document.querySelectorAll('#sessions tbody tr').length`); n != 4 {
			t.Errorf("%d sessions listed, want 4", n)
		}
		p.screenshot("sessions")
		p.open("/sessions?hot=1")
		if got := p.text("#sessions tbody"); !strings.Contains(got, "Dana Scully") || strings.Contains(got, "Fox") {
			t.Errorf("hot only lists %q", got)
		}
		p.open("/sessions?status=abandoned")
		if got := p.text("#sessions tbody"); !strings.Contains(got, "Fox Mulder") || strings.Contains(got, "Dana") {
			t.Errorf("abandoned lists %q", got)
		}
		p.open("/sessions?contact=" + hotEmail)
		if n := eval[int](p, `document.querySelectorAll('#sessions tbody tr a[href^="/sessions/"]').length`); n != 1 {
			t.Errorf("by contact e-mail: %d sessions", n)
		}
	})

	t.Run("a session's timeline shows its events and the deliveries each caused", func(t *testing.T) {
		p.t = t
		p.open("/sessions/" + hot)
		types := eval[string](p, `Array.from(document.querySelectorAll('#timeline > li')).map(function (li) { return li.dataset.type }).join(",")`)
		if want := "contact.created,session.started,session.progressed,session.progressed,lead.hot,session.completed,meeting.booked"; types != want {
			t.Errorf("timeline %s, want %s", types, want)
		}
		deliveries := eval[string](p, `Array.from(document.querySelectorAll('#timeline > li')).map(function (li) { return li.dataset.type + ":" + Array.from(li.querySelectorAll('table.deliveries tbody tr td:nth-child(3)')).map(function (td) { return td.textContent }).join("+") }).join(",")`)
		if want := "contact.created:failed,session.started:,session.progressed:,session.progressed:,lead.hot:succeeded,session.completed:succeeded,meeting.booked:succeeded"; deliveries != want {
			t.Errorf("deliveries by event %s, want %s", deliveries, want)
		}
		if got := query(p, chromedp.AttributeValue(chromedp.CSS(`#replay a`), "href")).Value; got != "https://replay.example.com/r/1" {
			t.Errorf("replay link %q", got)
		}
		if got := p.text("#meeting"); !strings.Contains(got, "2026-12-01 15:00 UTC") {
			t.Errorf("meeting %q", got)
		}
		if got := eval[string](p, `Array.from(document.querySelectorAll('ul.meters li')).map(function (li) { return li.children[0].textContent + " " + li.children[2].textContent }).join("|")`); got != "Intent score 92|Interest 95|Objections 5|Buying signals 80" {
			t.Errorf("signals %q", got)
		}
		p.screenshot("session")
		p.open("/sessions/" + hostile)
		if got := p.text("#contact-name"); got != strings.TrimSpace(hostileName) {
			t.Errorf("hostile contact shown as %q", got)
		}
		if !strings.Contains(p.text("dl.fields"), hostileEmail) {
			t.Error("the hostile e-mail is not shown as text")
		}
		if got := query(p, chromedp.AttributeValue(chromedp.CSS(`#replay a`), "href")).Value; !strings.HasPrefix(got, "https://replay.example.com/r/2?") {
			t.Errorf("replay link %q", got)
		}
		if eval[bool](p, `window.__pwned !== undefined`) {
			t.Error("hostile content ran as script")
		}
	})

	t.Run("contacts: search and a contact's sessions", func(t *testing.T) {
		p.t = t
		p.open("/contacts")
		if n := eval[int](p, `document.querySelectorAll('#contacts tbody tr').length`); n != 4 {
			t.Errorf("%d contacts, want 4", n)
		}
		p.screenshot("contacts")
		p.open("/contacts?q=scully")
		if got := p.text("#contacts tbody"); !strings.Contains(got, "Dana Scully") || strings.Contains(got, "Fox") {
			t.Errorf("search by name: %q", got)
		}
		p.submit(`#contacts tbody a`, `^/contacts/cnt_`)
		if got := p.text("#sessions tbody"); !strings.Contains(got, "completed") {
			t.Errorf("the contact's sessions %q", got)
		}
		p.screenshot("contact")
		p.open("/contacts?q=" + strings.ReplaceAll(hostileEmail, "&", "%26"))
		if eval[bool](p, `window.__pwned !== undefined`) || !strings.Contains(p.text("#contacts tbody"), hostileEmail) {
			t.Error("search by the hostile e-mail")
		}
	})

	t.Run("the attempt log shows why a delivery failed, and a retry from the page reaches the receiver", func(t *testing.T) {
		p.t = t
		p.open("/webhooks")
		row := p.text("#webhooks tbody tr")
		if !strings.Contains(row, rv.URL) || !strings.Contains(row, "enabled") || !strings.Contains(row, "80.0%") {
			t.Errorf("webhook row %q, want its URL, enabled and 8 of 10 attempts (80.0%%)", row)
		}
		p.screenshot("webhooks")
		p.open("/webhooks/" + webhookID + "?status=failed")
		failed := eval[string](p, `Array.from(document.querySelectorAll('#deliveries > li')).map(function (li) { return li.id }).join(",")`)
		if !strings.HasPrefix(failed, "dlv_") || strings.Contains(failed, ",") {
			t.Fatalf("failed deliveries %q, want one", failed)
		}
		attempts := eval[string](p, `Array.from(document.querySelectorAll('#`+failed+` table.attempts tbody tr')).map(function (tr) { return tr.children[2].textContent + " " + tr.children[3].textContent }).join("|")`)
		if attempts != "500 the receiver answered 500 Internal Server Error|500 the receiver answered 500 Internal Server Error" {
			t.Errorf("attempts %q", attempts)
		}
		p.open("/webhooks/" + webhookID)
		if got := eval[string](p, `Array.from(document.querySelectorAll('#per-hour-table tbody tr:last-child td')).map(function (td) { return td.textContent }).join(",")`); got != "8,1,1,10" {
			t.Errorf("this hour's outcomes %q, want 8 succeeded, 1 retried, 1 failed, 10 attempts", got)
		}
		p.run(chromedp.Evaluate[chromedp.Void](`document.querySelector('#` + failed + ` details').open = true`))
		p.screenshot("webhook")
		p.submit(`#`+failed+` form button`, `^/webhooks/wh_`)
		poll(t, "the retried delivery at the receiver", func() bool { return rv.got(200, "contact.created", hotEmail) == 1 })
		poll(t, "the delivery shown succeeded", func() bool {
			p.open("/webhooks/" + webhookID)
			return eval[string](p, `document.getElementById("`+failed+`").dataset.status`) == "succeeded"
		})
		codes := eval[string](p, `Array.from(document.querySelectorAll('#`+failed+` table.attempts tbody tr td:nth-child(3)')).map(function (td) { return td.textContent }).join(",")`)
		if codes != "500,500,200" {
			t.Errorf("attempts after the retry %q, want 500,500,200", codes)
		}
		p.open("/webhooks/" + webhookID + "/delete")
		p.screenshot("webhook-delete")
	})

	t.Run("the webhook's operations from its page: pause, resume, rotate, test, recover", func(t *testing.T) {
		p.t = t
		p.open("/webhooks/" + webhookID)
		p.submit(`#pause-form button`, `^/webhooks/wh_[^/]+$`)
		if got := p.text("#webhook-status"); !strings.HasPrefix(got, "disabled (reason: manual), since ") {
			t.Errorf("status after pause %q", got)
		}
		start("Paula Paused", "paused@example.com") // recorded while paused
		p.submit(`#resume-form button`, `^/webhooks/wh_[^/]+$`)
		poll(t, "the event recorded while paused, delivered on resume", func() bool {
			return rv.got(200, "contact.created", "paused@example.com") == 1
		})
		if got := p.text("#webhook-status"); got != "enabled" {
			t.Errorf("status after resume %q", got)
		}

		p.run(chromedp.SetValue(chromedp.CSS("#overlap"), "3600"))
		p.submit(`#rotate-form button`, `^/webhooks/wh_[^/]+/rotate-secret$`)
		secret := p.value("#new-secret")
		if !strings.HasPrefix(secret, "whsec_") || !strings.Contains(p.body(), "will not be shown again") ||
			!strings.Contains(p.text("#overlap-note"), "The previous secret also signs until") {
			t.Fatalf("rotation shows secret %q, or no warning or overlap", secret)
		}
		p.screenshot("webhook-rotated")
		p.open("/webhooks/" + webhookID)
		if strings.Contains(p.body(), secret) {
			t.Error("the webhook's page shows the new secret again")
		}

		p.set("#test-message", "hello from the dashboard")
		p.submit(`#test-form button`, `^/webhooks/wh_[^/]+$`)
		poll(t, "the test event at the receiver", func() bool { return rv.got(200, "webhook.test", "hello from the dashboard") == 1 })
		poll(t, "the test delivery in the attempt log", func() bool {
			p.open("/webhooks/" + webhookID + "?event=webhook.test")
			return eval[string](p, `Array.from(document.querySelectorAll('#deliveries > li')).map(function (li) { return li.dataset.status }).join(",")`) == "succeeded"
		})

		rv.down.Store(true)
		start("Otto Outage", "outage@example.com")
		poll(t, "the delivery failing through the outage", func() bool { return rv.got(500, "contact.created", "outage@example.com") == 2 })
		rv.down.Store(false)
		p.open("/webhooks/" + webhookID)
		p.submit(`#recover-form button`, `^/webhooks/wh_[^/]+/recover$`)
		if got := p.text("#queued"); !strings.HasPrefix(got, "1 failed delivery queued") {
			t.Errorf("recover answered %q, want 1 queued", got)
		}
		p.screenshot("webhook-recovered")
		poll(t, "the failed delivery re-sent after the outage", func() bool { return rv.got(200, "contact.created", "outage@example.com") == 1 })
		if n := rv.got(200, "contact.created", "paused@example.com"); n != 1 {
			t.Errorf("recover re-sent a delivery that had succeeded: %d", n)
		}
	})

	t.Run("the audit log names the user and the API key, and the chain status", func(t *testing.T) {
		p.t = t
		p.open("/audit")
		// Background verification checks new records in passes a moment
		// apart: it reaches the head soon after the last write.
		poll(t, "the chain verified to the head", func() bool {
			p.open("/audit")
			mm := regexp.MustCompile(`^Hash chain verified through seq (\d+) of (\d+)\.$`).FindStringSubmatch(p.text("#chain"))
			return mm != nil && mm[1] == mm[2]
		})
		p.screenshot("audit")
		p.open("/audit?type=webhook.registered")
		if got := p.text("#audit tbody"); !strings.Contains(got, "user "+adminEmail) || !strings.Contains(got, "webhook "+webhookID) {
			t.Errorf("webhook.registered row %q, want the user as actor and the webhook as subject", got)
		}
		p.open("/audit?type=session.completed")
		if got := p.text("#audit tbody"); !strings.Contains(got, "API key key_") || strings.Count(got, "session.completed") != 2 {
			t.Errorf("session.completed rows %q, want two, by the API key", got)
		}
		if got := query(p, chromedp.AttributeValue(chromedp.CSS(`#audit tbody a[href^="/sessions/"]`), "href")).Value; got != "/sessions/"+hostile {
			t.Errorf("newest session.completed links %q, want the hostile session", got)
		}
		if eval[bool](p, `window.__pwned !== undefined`) {
			t.Error("hostile content ran as script on the audit page")
		}
		resp := get(t, base+"/audit/export", "Cookie", "demosvc_session="+p.sessionCookie().Value)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Errorf("export: %d %q", resp.StatusCode, resp.Header.Get("Content-Disposition"))
		}
	})
}
