package dashboard

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/config"
	"demosvc/delivery"
	"demosvc/eventlog"
	"demosvc/projections"
)

// pagesWorld is a dashboard over real projections and a real delivery
// dispatcher, sending to a receiver on 127.0.0.1.
type pagesWorld struct {
	srv      *httptest.Server
	p        *projections.Projections
	dp       *delivery.Dispatcher
	acc      string
	pr       projections.Principal
	clock    *testClock
	received atomic.Int64
}

const (
	hostileName  = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> "quoted" & 'single'`
	hostileEmail = "o'neil&x=1{y}@example.com"
	jsReplay     = "javascript:window.__pwned=3"
)

// openPagesWorld opens a log in which a session already ended with a
// javascript: replay URL, as a log written before replay URLs were
// checked could hold: the API refuses one today, the dashboard must still
// never make it a link.
func openPagesWorld(t *testing.T) *pagesWorld {
	t.Helper()
	clock := &testClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	old := projections.PasswordParams
	projections.PasswordParams = projections.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}
	t.Cleanup(func() { projections.PasswordParams = old })
	store, err := eventlog.OpenStore(t.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(clock.now)})
	if err != nil {
		t.Fatal(err)
	}
	ids := log.IDs()
	acc, agent, contact, ses := ids.New("acc_"), ids.New(projections.PrefixAgent), ids.New(projections.PrefixContact), ids.New(projections.PrefixSession)
	tx, err := log.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ev := func(p any) eventlog.Event { return eventlog.Event{Account: acc, Actor: "cli", Payload: p} }
	if _, err := tx.Add([]eventlog.Event{
		ev(&projections.AccountCreated{AccountID: acc, Name: "acme", Plan: projections.PlanPro}),
		ev(&projections.AgentCreated{AgentID: agent, Name: "Old agent", SandboxURL: "https://s.example.com", Status: projections.AgentActive}),
		ev(&projections.ContactCreated{ContactID: contact, SessionID: ses, AgentID: agent, Contact: projections.Contact{Name: "Old contact", Email: "old@example.com"}}),
		ev(&projections.SessionStarted{SessionID: ses, AgentID: agent, ContactID: contact}),
		ev(&projections.SessionCompleted{SessionID: ses, IntentScore: 10, ReplayURL: jsReplay}),
	}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	sealer, err := eventlog.NewSealer(make([]byte, eventlog.MasterKeySize), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	opts := projections.DefaultOptions
	opts.Sealer, opts.AllowPrivateNetworks = sealer, true
	p, err := projections.Open(log, opts)
	if err != nil {
		t.Fatal(err)
	}
	dp := delivery.New(log, p, delivery.Config{Timeout: 2 * time.Second, MaxRetries: 0, Backoff: time.Millisecond, BackoffFactor: 1,
		AllowPrivate: true}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { dp.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; p.Close(); log.Close(); store.Close() })
	account, _ := p.AccountByID(acc)
	key, err := p.CreateKey(context.Background(), "cli", acc)
	if err != nil {
		t.Fatal(err)
	}
	w := &pagesWorld{p: p, dp: dp, acc: acc, pr: projections.Principal{Account: account, KeyID: key.ID}, clock: clock}
	w.srv = httptest.NewServer(New(Deps{State: p, Config: config.Default(), Clock: clock.now, Deliveries: dp}))
	t.Cleanup(w.srv.Close)
	return w
}

// oldSession is the session openPagesWorld wrote with a javascript: replay.
func (w *pagesWorld) oldSession(t *testing.T) string {
	t.Helper()
	pg, err := w.p.SessionRows(w.acc, projections.SessionQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range pg.Rows {
		if r.ReplayURL == jsReplay {
			return r.ID
		}
	}
	t.Fatal("no session with the javascript: replay")
	return ""
}

// scriptFromData matches markup that only the hostile data could have put
// in a page, unescaped.
var scriptFromData = regexp.MustCompile(`<script>window|<img src=x|href="javascript:|onerror="window`)

func TestPagesShowHostileContentAsText(t *testing.T) {
	w := openPagesWorld(t)
	ctx := context.Background()
	tok := signIn(t, w.p, w.acc, "admin@example.com", w.clock.now(), time.Hour)
	rv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.received.Add(1)
		rw.WriteHeader(http.StatusInternalServerError) // every delivery fails for good (no retries)
	}))
	defer rv.Close()
	hookURL := rv.URL + `/hook?q="><script>window.__pwned=4</script>`
	v, err := w.p.RegisterWebhook(ctx, w.pr, projections.WebhookInput{URL: hookURL, Events: []string{"contact.created", "demo.completed"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wh := v.(projections.WebhookView)
	a, err := w.p.CreateAgent(ctx, w.pr, projections.AgentInput{Name: hostileName, SandboxURL: "https://s.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agent := a.(projections.AgentView)
	sv, err := w.p.StartSession(ctx, w.pr, projections.SessionInput{AgentID: agent.ID,
		Contact: &projections.Contact{Name: hostileName, Email: hostileEmail, Company: hostileName}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ses struct {
		ID        string `json:"id"`
		ContactID string `json:"contact_id"`
	}
	json.Unmarshal(sv.(json.RawMessage), &ses)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, _, _, _ := w.dp.SearchDeliveries(wh.ID, 10, "", delivery.Filter{Status: delivery.StatusFailed})
		if len(ds) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the contact.created delivery did not fail")
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
	old := w.oldSession(t)
	for _, path := range []string{"/", "/sessions", "/sessions/" + ses.ID, "/sessions/" + old, "/contacts", "/contacts/" + ses.ContactID,
		"/contacts?q=" + url.QueryEscape("<script>"), "/webhooks", "/webhooks/" + wh.ID, "/webhooks/" + wh.ID + "/delete",
		"/audit", "/audit?type=agent.created", "/webhooks/new", "/agents/" + agent.ID} {
		resp, body := do(t, w.srv, "GET", path, tok, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
			continue
		}
		if m := scriptFromData.FindString(body); m != "" {
			t.Errorf("GET %s: the page holds %q unescaped", path, m)
		}
	}
	_, body := do(t, w.srv, "GET", "/sessions/"+ses.ID, tok, nil)
	for _, want := range []string{"&lt;script&gt;window.__pwned=1&lt;/script&gt;", "o&#39;neil&amp;x=1{y}@example.com", "contact.created", "failed"} {
		if !strings.Contains(body, want) {
			t.Errorf("the session page lacks %q", want)
		}
	}
	_, body = do(t, w.srv, "GET", "/sessions/"+old, tok, nil)
	if !strings.Contains(body, "not a web link, shown as text") || !strings.Contains(body, "<code>javascript:window.__pwned=3</code>") {
		t.Errorf("the javascript: replay URL is not shown as text:\n%s", section(body, "replay"))
	}
	if strings.Contains(body, `href="javascript`) || strings.Contains(body, "#ZgotmplZ") {
		t.Error("the javascript: replay URL became a link")
	}
	_, body = do(t, w.srv, "GET", "/audit?type=contact.created", tok, nil)
	if !strings.Contains(body, "/contacts/"+ses.ContactID) || !strings.Contains(body, "API key <code>"+w.pr.KeyID+"</code>") {
		t.Errorf("the audit page does not link the contact or name the key:\n%s", section(body, "audit"))
	}
}

// section returns the part of body around id, for a failure message.
func section(body, id string) string {
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		return body
	}
	return body[i:min(len(body), i+1500)]
}

func TestAnotherAccountsPagesAreNotFound(t *testing.T) {
	w := openPagesWorld(t)
	ctx := context.Background()
	tok := signIn(t, w.p, w.acc, "admin@example.com", w.clock.now(), time.Hour)
	other, err := w.p.CreateAccount(ctx, "cli", "other", projections.PlanPro, 0)
	if err != nil {
		t.Fatal(err)
	}
	opr := projections.Principal{Account: other, KeyID: "cli"}
	a, _ := w.p.CreateAgent(ctx, opr, projections.AgentInput{Name: "theirs", SandboxURL: "https://s.example.com"}, nil)
	sv, err := w.p.StartSession(ctx, opr, projections.SessionInput{AgentID: a.(projections.AgentView).ID,
		Contact: &projections.Contact{Name: "Their contact", Email: "their@example.com"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ses struct {
		ID        string `json:"id"`
		ContactID string `json:"contact_id"`
	}
	json.Unmarshal(sv.(json.RawMessage), &ses)
	v, err := w.p.RegisterWebhook(ctx, opr, projections.WebhookInput{URL: "http://127.0.0.1:9/x", Events: []string{"lead.hot"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wh := v.(projections.WebhookView).ID
	for _, c := range []struct{ method, path string }{
		{"GET", "/sessions/" + ses.ID}, {"GET", "/contacts/" + ses.ContactID}, {"GET", "/webhooks/" + wh},
		{"GET", "/webhooks/" + wh + "/delete"}, {"POST", "/webhooks/" + wh + "/delete"},
		{"POST", "/webhooks/" + wh + "/deliveries/dlv_x/retry"}, {"GET", "/sessions/ses_nope"},
	} {
		var form url.Values
		if c.method == "POST" {
			form = url.Values{}
		}
		if resp, _ := do(t, w.srv, c.method, c.path, tok, form); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", c.method, c.path, resp.StatusCode)
		}
	}
	if _, err := w.p.Webhook(other.ID, wh); err != nil {
		t.Errorf("their webhook is gone: %v", err)
	}
	// Lists show none of theirs.
	for _, path := range []string{"/sessions", "/contacts", "/webhooks", "/audit", "/contacts?q=their"} {
		_, body := do(t, w.srv, "GET", path, tok, nil)
		if strings.Contains(body, "Their contact") || strings.Contains(body, ses.ID) || strings.Contains(body, wh) {
			t.Errorf("%s shows another account's data", path)
		}
	}
	// The export holds this account's records only, every one of them.
	resp, body := do(t, w.srv, "GET", "/audit/export", tok, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/jsonl") {
		t.Fatalf("export: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	var prev uint64
	for sc.Scan() {
		var rec eventlog.JSONRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("export line %d: %v", n+1, err)
		}
		if rec.AccountID != w.acc {
			t.Errorf("export line %d is of account %s", n+1, rec.AccountID)
		}
		if rec.Seq <= prev || len(rec.Hash) != 64 {
			t.Errorf("export line %d: seq %d after %d, hash %q", n+1, rec.Seq, prev, rec.Hash)
		}
		if strings.Contains(string(rec.Data), "$sealed") {
			t.Errorf("export line %d carries sealed bytes: %s", n+1, rec.Data)
		}
		prev = rec.Seq
		n++
	}
	if want := len(w.p.AccountEventSeqs(w.acc, 0, 1_000_000)); n != want || n < 7 {
		t.Errorf("export has %d records, the account %d", n, want)
	}
}

func TestAViewerCannotAuditOrChangeWebhooks(t *testing.T) {
	w := openPagesWorld(t)
	ctx := context.Background()
	u, link, err := w.p.CreateUser(ctx, "cli", w.acc, "viewer@example.com", projections.RoleViewer, w.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := w.p.CompleteSetup(ctx, link.Token, "", "a long password", projections.ClientInfo{}, w.clock.now(), time.Hour)
	if err != nil || u.Role != projections.RoleViewer {
		t.Fatal(err)
	}
	v, err := w.p.RegisterWebhook(ctx, w.pr, projections.WebhookInput{URL: "http://127.0.0.1:9/x", Events: []string{"lead.hot"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wh := v.(projections.WebhookView).ID
	for _, c := range []struct{ method, path string }{
		{"GET", "/audit"}, {"GET", "/audit/export"}, {"GET", "/webhooks/new"}, {"POST", "/webhooks"},
		{"POST", "/webhooks/" + wh + "/delete"}, {"POST", "/webhooks/" + wh + "/deliveries/dlv_x/retry"},
	} {
		var form url.Values
		if c.method == "POST" {
			form = url.Values{"url": {"http://127.0.0.1:9/y"}, "events": {"lead.hot"}}
		}
		if resp, _ := do(t, w.srv, c.method, c.path, tok, form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("viewer %s %s: %d, want 403", c.method, c.path, resp.StatusCode)
		}
	}
	if pg, _ := w.p.Webhooks(w.acc, projections.ListQuery{Limit: 10}); len(pg.Data) != 1 {
		t.Errorf("the viewer changed the webhooks: %d", len(pg.Data))
	}
	for _, path := range []string{"/", "/sessions", "/contacts", "/webhooks", "/webhooks/" + wh} {
		resp, body := do(t, w.srv, "GET", path, tok, nil)
		if resp.StatusCode != http.StatusOK || strings.Contains(body, ">Delete<") || strings.Contains(body, "New webhook") {
			t.Errorf("viewer GET %s: %d, or shows an admin's button", path, resp.StatusCode)
		}
	}
}
