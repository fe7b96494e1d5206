package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/delivery"
	"demosvc/projections"
)

// opsReceiver is a webhook receiver on 127.0.0.1 that answers 500 while
// failing is set and keeps every body with its X-Service-Signature.
type opsReceiver struct {
	srv     *httptest.Server
	failing atomic.Bool
	mu      sync.Mutex
	bodies  []string
	sigs    []string
}

func newOpsReceiver(t *testing.T) *opsReceiver {
	rv := &opsReceiver{}
	rv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rv.mu.Lock()
		rv.bodies = append(rv.bodies, string(b))
		rv.sigs = append(rv.sigs, r.Header.Get("X-Service-Signature"))
		rv.mu.Unlock()
		if rv.failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(rv.srv.Close)
	return rv
}

// count is how many requests held part.
func (rv *opsReceiver) count(part string) int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	n := 0
	for _, b := range rv.bodies {
		if strings.Contains(b, part) {
			n++
		}
	}
	return n
}

// waitUntil polls cond until it holds or the deadline, which only bounds
// a failing test.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// opsWorld is a pages world with an admin signed in and one webhook
// subscribed to contact.created (a test event goes to any webhook), sending to rv.
func opsWorld(t *testing.T) (*pagesWorld, *opsReceiver, string, string) {
	w := openPagesWorld(t)
	rv := newOpsReceiver(t)
	tok := signIn(t, w.p, w.acc, "admin@example.com", w.clock.now(), time.Hour)
	v, err := w.p.RegisterWebhook(context.Background(), w.pr, projections.WebhookInput{URL: rv.srv.URL + "/hook",
		Events: []string{"contact.created"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w, rv, tok, v.(projections.WebhookView).ID
}

// newContact starts a session for a new contact named name: one
// contact.created event.
func (w *pagesWorld) newContact(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	a, err := w.p.CreateAgent(ctx, w.pr, projections.AgentInput{Name: "Agent " + name, SandboxURL: "https://s.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.p.StartSession(ctx, w.pr, projections.SessionInput{AgentID: a.(projections.AgentView).ID,
		Contact: &projections.Contact{Name: name, Email: strings.ToLower(name) + "@example.com"}}, nil); err != nil {
		t.Fatal(err)
	}
}

func mustStatus(t *testing.T, what string, resp *http.Response, body string, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s: %d, want %d\n%s", what, resp.StatusCode, want, section(body, "main"))
	}
}

func TestWebhookPauseAndResumeFromThePage(t *testing.T) {
	w, rv, tok, wh := opsWorld(t)
	resp, body := do(t, w.srv, "POST", "/webhooks/"+wh+"/status", tok, url.Values{"status": {"disabled"}})
	mustStatus(t, "pause", resp, body, http.StatusSeeOther)
	if v, _ := w.p.Webhook(w.acc, wh); v.Status != "disabled" || v.DisabledReason != projections.DisabledManual || v.DisabledAt == "" {
		t.Fatalf("after pause: %+v", v)
	}
	_, body = do(t, w.srv, "GET", "/webhooks/"+wh, tok, nil)
	if !strings.Contains(body, "disabled (reason: manual), since 2026-11-21 12:00 UTC") || !strings.Contains(body, `id="resume-form"`) {
		t.Errorf("the page does not show the pause and the Resume button:\n%s", section(body, "webhook-status"))
	}
	// A test event is refused while paused, saying why.
	resp, body = do(t, w.srv, "POST", "/webhooks/"+wh+"/test", tok, url.Values{})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "is disabled (manual)") {
		t.Errorf("test while paused: %d", resp.StatusCode)
	}
	w.newContact(t, "Backlog")
	resp, body = do(t, w.srv, "POST", "/webhooks/"+wh+"/status", tok, url.Values{"status": {"enabled"}})
	mustStatus(t, "resume", resp, body, http.StatusSeeOther)
	waitUntil(t, "the backlog's delivery after resume", func() bool { return rv.count("backlog@example.com") == 1 })

	// Resume skipping the backlog: what arrived while paused is not sent;
	// what arrives after is (deliveries of one webhook go in log order).
	do(t, w.srv, "POST", "/webhooks/"+wh+"/status", tok, url.Values{"status": {"disabled"}})
	w.newContact(t, "Skipped")
	resp, body = do(t, w.srv, "POST", "/webhooks/"+wh+"/status", tok, url.Values{"status": {"enabled"}, "skip_backlog": {"true"}})
	mustStatus(t, "resume skipping the backlog", resp, body, http.StatusSeeOther)
	w.newContact(t, "After")
	waitUntil(t, "the event after resume", func() bool { return rv.count("after@example.com") == 1 })
	if n := rv.count("skipped@example.com"); n != 0 {
		t.Errorf("the skipped backlog was sent %d times", n)
	}
	if v, _ := w.p.Webhook(w.acc, wh); v.Status != "enabled" || v.DisabledReason != "" {
		t.Errorf("after resume: %+v", v)
	}
	resp, _ = do(t, w.srv, "POST", "/webhooks/"+wh+"/status", tok, url.Values{"status": {"paused"}})
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("a bad status: %d, want 409", resp.StatusCode)
	}
}

var secretOnPage = regexp.MustCompile(`id="new-secret" type="text" readonly value="(whsec_[^"]+)"`)

func TestWebhookRotateSecretShowsItOnceAndItSigns(t *testing.T) {
	w, rv, tok, wh := opsWorld(t)
	resp, body := do(t, w.srv, "POST", "/webhooks/"+wh+"/rotate-secret", tok, url.Values{"previous_expires_in": {"3600"}})
	mustStatus(t, "rotate", resp, body, http.StatusOK)
	if m := secretOnPage.FindStringSubmatch(body); m == nil || !strings.Contains(body, "It will not be shown again") ||
		!strings.Contains(body, "also signs until 2026-11-21 13:00 UTC") || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the rotation page lacks the secret, the warning or the overlap:\n%s", section(body, "secret-title"))
	}
	// With no overlap, the shown secret alone signs: the seed's HMAC of
	// the next delivery verifies with it.
	resp, body = do(t, w.srv, "POST", "/webhooks/"+wh+"/rotate-secret", tok, url.Values{"previous_expires_in": {"0"}})
	mustStatus(t, "rotate at once", resp, body, http.StatusOK)
	secret := html.UnescapeString(secretOnPage.FindStringSubmatch(body)[1])
	_, page := do(t, w.srv, "GET", "/webhooks/"+wh, tok, nil)
	if strings.Contains(html.UnescapeString(page), secret) {
		t.Error("the webhook page shows the secret again")
	}
	resp, body = do(t, w.srv, "POST", "/webhooks/"+wh+"/test", tok, url.Values{"message": {"after rotation"}})
	mustStatus(t, "test", resp, body, http.StatusSeeOther)
	waitUntil(t, "the test delivery", func() bool { return rv.count("after rotation") == 1 })
	rv.mu.Lock()
	b, sig := rv.bodies[len(rv.bodies)-1], rv.sigs[len(rv.sigs)-1]
	rv.mu.Unlock()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(b))
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); sig != want {
		t.Errorf("X-Service-Signature %s is not the shown secret's %s", sig, want)
	}
	for _, bad := range []string{"60", "604801", "x"} {
		if resp, _ := do(t, w.srv, "POST", "/webhooks/"+wh+"/rotate-secret", tok, url.Values{"previous_expires_in": {bad}}); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("overlap %s: %d, want 422", bad, resp.StatusCode)
		}
	}
}

func TestWebhookTestEventAppearsInTheAttemptLog(t *testing.T) {
	w, rv, tok, wh := opsWorld(t)
	resp, body := do(t, w.srv, "POST", "/webhooks/"+wh+"/test", tok, url.Values{"message": {"hello <b>crm</b>"}})
	mustStatus(t, "test", resp, body, http.StatusSeeOther)
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "/webhooks/"+wh+"#dlv_") {
		t.Fatalf("test redirects to %q", loc)
	}
	dlv := strings.TrimPrefix(loc, "/webhooks/"+wh+"#")
	waitUntil(t, "the test event at the receiver", func() bool {
		return rv.count(`"message":"hello \u003cb\u003ecrm\u003c/b\u003e"`)+rv.count(`"message":"hello <b>crm</b>"`) == 1
	})
	waitUntil(t, "the test delivery to succeed", func() bool {
		d, err := w.dp.Delivery(wh, dlv)
		return err == nil && d.Status == delivery.StatusSucceeded
	})
	_, body = do(t, w.srv, "GET", "/webhooks/"+wh, tok, nil)
	if !strings.Contains(body, `<li id="`+dlv+`" data-status="succeeded">`) || !strings.Contains(body, "webhook.test") {
		t.Errorf("the attempt log does not show the test delivery %s:\n%s", dlv, section(body, "deliveries"))
	}
	head := w.p.Seq()
	for what, m := range map[string]string{"a too long message": strings.Repeat("x", 5000), "a message not in UTF-8": "hi \xff there"} {
		resp, body = do(t, w.srv, "POST", "/webhooks/"+wh+"/test", tok, url.Values{"message": {m}})
		if resp.StatusCode != http.StatusConflict || w.p.Seq() != head {
			t.Errorf("%s: %d, log head %d → %d; want 409 and nothing recorded\n%s", what, resp.StatusCode, head, w.p.Seq(), section(body, "main"))
		}
	}
}

var queued = regexp.MustCompile(`<p id="queued"><strong>(\d+)</strong>`)

func TestWebhookRecoverAndReplayFromThePage(t *testing.T) {
	w, rv, tok, wh := opsWorld(t)
	rv.failing.Store(true)
	w.newContact(t, "Outage")
	waitUntil(t, "the failed delivery", func() bool {
		ds, _, _, _ := w.dp.SearchDeliveries(wh, 10, "", delivery.Filter{Status: delivery.StatusFailed})
		return len(ds) == 1
	})
	rv.failing.Store(false)
	w.newContact(t, "Healthy")
	waitUntil(t, "the delivery after the outage", func() bool { return rv.count("healthy@example.com") == 1 })
	// The page prefills the last 24 hours.
	_, page := do(t, w.srv, "GET", "/webhooks/"+wh, tok, nil)
	if !strings.Contains(page, `name="since" value="2026-11-20T12:00:00Z"`) {
		t.Fatalf("the recover form is not prefilled with the last 24 h:\n%s", section(page, "recover-form"))
	}
	resp, body := do(t, w.srv, "POST", "/webhooks/"+wh+"/recover", tok, url.Values{"since": {"2026-11-20T12:00:00Z"}, "until": {""}})
	mustStatus(t, "recover", resp, body, http.StatusOK)
	if m := queued.FindStringSubmatch(body); m == nil || m[1] != "1" || strings.Contains(body, "continue-form") {
		t.Fatalf("recover does not say 1 queued:\n%s", section(body, "queued"))
	}
	waitUntil(t, "the recovered delivery", func() bool { return rv.count("outage@example.com") == 2 })
	if n := rv.count("healthy@example.com"); n != 1 {
		t.Errorf("recover re-sent a delivery that had succeeded: %d", n)
	}
	// Replay re-sends both events.
	resp, body = do(t, w.srv, "POST", "/webhooks/"+wh+"/replay", tok, url.Values{"since": {"2026-11-20T12:00:00Z"}})
	mustStatus(t, "replay", resp, body, http.StatusOK)
	if m := queued.FindStringSubmatch(body); m == nil || m[1] != "2" {
		t.Fatalf("replay does not say 2 queued:\n%s", section(body, "queued"))
	}
	waitUntil(t, "the replayed deliveries", func() bool {
		return rv.count("outage@example.com") == 3 && rv.count("healthy@example.com") == 2
	})
	// A bad window gets the API's message and queues nothing.
	for _, c := range []struct{ path, since, until, want string }{
		{"recover", "", "", "since is required"},
		{"recover", "yesterday", "", "since must be an RFC 3339 timestamp"},
		{"recover", "2026-11-21T12:00:00Z", "2026-11-21T11:00:00Z", "until must be after since"},
		{"replay", "2026-11-20T12:00:00Z", "", ""},
	} {
		form := url.Values{"since": {c.since}, "until": {c.until}, "after": {"bogus"}}
		if c.want != "" {
			form.Del("after")
		} else {
			c.want = "after must be the next value of a previous replay answer"
		}
		resp, body := do(t, w.srv, "POST", "/webhooks/"+wh+"/"+c.path, tok, form)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(html.UnescapeString(body), c.want) {
			t.Errorf("%s since %q until %q: %d, want 409 with %q", c.path, c.since, c.until, resp.StatusCode, c.want)
		}
	}
}

// TestWebhookRecoverContinues has more failed deliveries than one call
// queues: the answer offers Continue, which queues the rest.
func TestWebhookRecoverContinues(t *testing.T) {
	if testing.Short() {
		t.Skip("sends over 500 deliveries")
	}
	w, rv, tok, wh := opsWorld(t)
	rv.failing.Store(true)
	const n = projections.MaxRedelivery + 3
	for i := range n {
		if _, err := w.dp.SendTest(context.Background(), w.pr, wh, "m", nil); err != nil {
			t.Fatal(i, err)
		}
	}
	waitUntil(t, "every delivery to fail", func() bool {
		ds, _, _, _ := w.dp.SearchDeliveries(wh, n+1, "", delivery.Filter{Status: delivery.StatusFailed})
		return len(ds) == n
	})
	rv.failing.Store(false)
	resp, body := do(t, w.srv, "POST", "/webhooks/"+wh+"/recover", tok, url.Values{"since": {"2026-11-20T12:00:00Z"}})
	mustStatus(t, "recover", resp, body, http.StatusOK)
	m := queued.FindStringSubmatch(body)
	next := regexp.MustCompile(`name="after" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil || m[1] != "500" || next == nil || !strings.Contains(body, `action="/webhooks/`+wh+`/recover" id="continue-form"`) {
		t.Fatalf("the first call does not queue 500 and offer Continue:\n%s", section(body, "queued"))
	}
	resp, body = do(t, w.srv, "POST", "/webhooks/"+wh+"/recover", tok, url.Values{"since": {"2026-11-20T12:00:00Z"}, "after": {html.UnescapeString(next[1])}})
	mustStatus(t, "continue", resp, body, http.StatusOK)
	if m := queued.FindStringSubmatch(body); m == nil || m[1] != "3" || strings.Contains(body, "continue-form") {
		t.Fatalf("Continue does not queue the last 3:\n%s", section(body, "queued"))
	}
	waitUntil(t, "every recovered delivery to succeed", func() bool {
		ds, _, _, _ := w.dp.SearchDeliveries(wh, n+1, "", delivery.Filter{Status: delivery.StatusSucceeded})
		return len(ds) == n
	})
}

func TestWebhookEditSaysWhatTheAPISays(t *testing.T) {
	w, _, tok, wh := opsWorld(t)
	_, form := do(t, w.srv, "GET", "/webhooks/"+wh+"/edit", tok, nil)
	if !strings.Contains(form, `value="contact.created" checked`) || !strings.Contains(form, `name="rate_limit_per_second" value="0"`) {
		t.Fatalf("the edit form is not filled with the webhook")
	}
	bad := "ftp://127.0.0.1/x"
	_, apiErr := w.p.UpdateWebhook(context.Background(), w.pr, wh, projections.WebhookPatch{URL: &bad})
	var pe *projections.Error
	if !errors.As(apiErr, &pe) || pe.Param != "url" {
		t.Fatalf("the API's error: %v", apiErr)
	}
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"url": {bad}, "events": {"lead.hot"}, "rate_limit_per_second": {"0"}}, pe.Message},
		{url.Values{"url": {"http://127.0.0.1:9/y"}, "rate_limit_per_second": {"0"}}, "events"},
		{url.Values{"url": {"http://127.0.0.1:9/y"}, "events": {"lead.hot"}, "rate_limit_per_second": {"fast"}}, "must be a whole number"},
		{url.Values{"url": {"http://127.0.0.1:9/y"}, "events": {"lead.hot"}, "rate_limit_per_second": {"-1"}}, "rate"},
	} {
		resp, body := do(t, w.srv, "POST", "/webhooks/"+wh+"/edit", tok, c.form)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(html.UnescapeString(body), c.want) ||
			!strings.Contains(body, `class="field-error"`) {
			t.Errorf("edit %v: %d, want 422 with %q", c.form, resp.StatusCode, c.want)
		}
	}
	if v, _ := w.p.Webhook(w.acc, wh); !strings.HasSuffix(v.URL, "/hook") || len(v.Events) != 1 || v.Events[0] != "contact.created" {
		t.Errorf("a refused edit changed the webhook: %+v", v)
	}
	resp, body := do(t, w.srv, "POST", "/webhooks/"+wh+"/edit", tok,
		url.Values{"url": {"http://127.0.0.1:9/y"}, "events": {"lead.hot", "demo.completed"}, "rate_limit_per_second": {"5"}})
	mustStatus(t, "edit", resp, body, http.StatusSeeOther)
	if v, _ := w.p.Webhook(w.acc, wh); v.URL != "http://127.0.0.1:9/y" || len(v.Events) != 2 || v.RateLimitPerSecond != 5 {
		t.Errorf("after edit: %+v", v)
	}
}

// opsPaths are the webhook operations' routes, with a form each would
// change something with.
func opsPaths(wh string) []struct {
	path string
	form url.Values
} {
	return []struct {
		path string
		form url.Values
	}{
		{"/webhooks/" + wh + "/status", url.Values{"status": {"disabled"}}},
		{"/webhooks/" + wh + "/edit", url.Values{"url": {"http://127.0.0.1:9/z"}, "events": {"lead.hot"}, "rate_limit_per_second": {"1"}}},
		{"/webhooks/" + wh + "/rotate-secret", url.Values{"previous_expires_in": {"0"}}},
		{"/webhooks/" + wh + "/test", url.Values{"message": {"m"}}},
		{"/webhooks/" + wh + "/recover", url.Values{"since": {"2026-11-20T12:00:00Z"}}},
		{"/webhooks/" + wh + "/replay", url.Values{"since": {"2026-11-20T12:00:00Z"}}},
	}
}

func TestWebhookOpsRefuseViewersOtherAccountsAndOtherSites(t *testing.T) {
	w, _, admin, wh := opsWorld(t)
	ctx := context.Background()
	_, link, err := w.p.CreateUser(ctx, "cli", w.acc, "viewer@example.com", projections.RoleViewer, w.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	_, viewer, err := w.p.CompleteSetup(ctx, link.Token, "", "a long password", projections.ClientInfo{}, w.clock.now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := w.p.CreateAccount(ctx, "cli", "other", projections.PlanPro, 0)
	if err != nil {
		t.Fatal(err)
	}
	ov, err := w.p.RegisterWebhook(ctx, projections.Principal{Account: other, KeyID: "cli"},
		projections.WebhookInput{URL: "http://127.0.0.1:9/x", Events: []string{"lead.hot"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	theirs := ov.(projections.WebhookView)
	before, _ := w.p.Webhook(w.acc, wh)
	seqs := len(w.p.AccountEventSeqs(w.acc, 0, 1_000_000))
	for _, c := range opsPaths(wh) {
		if resp, _ := do(t, w.srv, "POST", c.path, viewer, c.form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d, want 403", c.path, resp.StatusCode)
		}
	}
	if resp, _ := do(t, w.srv, "GET", "/webhooks/"+wh+"/edit", viewer, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("viewer edit form: %d, want 403", resp.StatusCode)
	}
	if _, body := do(t, w.srv, "GET", "/webhooks/"+wh, viewer, nil); strings.Contains(body, `id="ops"`) || strings.Contains(body, "/edit") {
		t.Error("a viewer is shown the operations")
	}
	if _, body := do(t, w.srv, "GET", "/webhooks/"+wh, admin, nil); !strings.Contains(body, `id="ops"`) {
		t.Error("an admin is not shown the operations")
	}
	for _, c := range opsPaths(theirs.ID) {
		if resp, _ := do(t, w.srv, "POST", c.path, admin, c.form); resp.StatusCode != http.StatusNotFound {
			t.Errorf("another account's POST %s: %d, want 404", c.path, resp.StatusCode)
		}
	}
	if resp, _ := do(t, w.srv, "GET", "/webhooks/"+theirs.ID+"/edit", admin, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another account's edit form: %d, want 404", resp.StatusCode)
	}
	if v, _ := w.p.Webhook(other.ID, theirs.ID); v.Status != "enabled" || v.URL != theirs.URL {
		t.Errorf("their webhook changed: %+v", v)
	}
	// A cross-site POST, with the admin's cookie, is refused.
	for _, c := range opsPaths(wh) {
		req, _ := http.NewRequest("POST", w.srv.URL+c.path, strings.NewReader(c.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.AddCookie(&http.Cookie{Name: "demosvc_session", Value: admin})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site POST %s: %d, want 403", c.path, resp.StatusCode)
		}
	}
	if after, _ := w.p.Webhook(w.acc, wh); after.Status != before.Status || after.URL != before.URL ||
		len(w.p.AccountEventSeqs(w.acc, 0, 1_000_000)) != seqs {
		t.Errorf("a refused request changed something: %+v", after)
	}
}
