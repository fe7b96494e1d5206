package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"demosvc/delivery"
	"demosvc/docs/receivers"
)

// The receivers the README shows (docs/receivers/receiver.{go,ts,py}) are
// run here against real deliveries from a real server. A proxy between the
// server and each receiver answers 503 to the first attempt of every event
// after the receiver has answered it, as when an acknowledgement is lost, so
// the server really sends each event twice: the receiver must verify both
// attempts (each has its own webhook-timestamp and signature) and process
// the event once. Then forged and replayed copies of a real delivery go to
// the receiver directly, and must be refused or ignored.

// snippetEvent is one event a receiver processed.
type snippetEvent struct{ id, event string }

// processedLog collects what a receiver processed, in order.
type processedLog struct {
	mu     sync.Mutex
	events []snippetEvent
}

func (l *processedLog) add(e snippetEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *processedLog) list() []snippetEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// waitFor polls until the log holds n events.
func (l *processedLog) waitFor(t *testing.T, n int) []snippetEvent {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := l.list()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver processed %d events after 30s, want %d: %v", len(got), n, got)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// exchange is one attempt the proxy passed on, and the receiver's answer.
type exchange struct {
	header http.Header
	body   []byte
	status int
}

// lossyProxy forwards each delivery to the receiver and then, for the first
// attempt of each event, answers 503 to the server whatever the receiver
// said: the server retries, and the receiver sees the event twice.
type lossyProxy struct {
	mu        sync.Mutex
	target    string
	seen      map[string]int
	exchanges []exchange
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	status := http.StatusBadGateway
	if target != "" {
		status = send(target, r.Header, body)
	}
	p.mu.Lock()
	p.exchanges = append(p.exchanges, exchange{header: r.Header.Clone(), body: body, status: status})
	id := r.Header.Get("X-Service-Event-Id")
	p.seen[id]++
	first := p.seen[id] == 1
	p.mu.Unlock()
	if first {
		status = http.StatusServiceUnavailable // the receiver's answer is "lost"
	}
	w.WriteHeader(status)
}

func (p *lossyProxy) setTarget(url string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = url
}

func (p *lossyProxy) recorded() []exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.exchanges)
}

// send POSTs body with header to url and returns the status (0 if no answer).
func send(url string, header http.Header, body []byte) int {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header = header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// apiCaller calls the server's API with a key, checking every response
// against openapi.yaml.
type apiCaller struct {
	t    *testing.T
	base string
	key  string
}

func (a apiCaller) call(method, path, body string, want int) map[string]any {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		a.t.Fatal(err)
	}
	if err := checkOpenAPI(req, body, resp, b); err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	var v map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			a.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return v
}

// waitDeliveries polls a webhook's attempt log until it has n deliveries,
// each succeeded at its second attempt, and returns their event ids by
// event name.
func (a apiCaller) waitDeliveries(webhookID string, n int) map[string]string {
	a.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list := a.call("GET", "/v1/webhooks/"+webhookID+"/deliveries?limit=100", "", 200)["data"].([]any)
		ids := map[string]string{}
		ok := len(list) == n
		for _, item := range list {
			d := item.(map[string]any)
			if d["status"] == "failed" {
				a.t.Fatalf("a delivery failed: %v", d)
			}
			ok = ok && d["status"] == "succeeded" && d["attempts"] == float64(2)
			ids[d["event"].(string)] = d["event_id"].(string)
		}
		if ok {
			return ids
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("deliveries after 30s: %v, want %d succeeded at the second attempt", list, n)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

var firstKeyRE = regexp.MustCompile(`(?m)^(sk_[A-Za-z0-9_-]{43})$`)

func TestReceiverSnippets(t *testing.T) {
	base, out := startServe(t, map[string]string{
		"DEMOSVC_DELIVERY_ALLOW_PRIVATE_NETWORKS": "true", // the receivers are on 127.0.0.1
		"DEMOSVC_DELIVERY_BACKOFF":                "20ms",
		"DEMOSVC_DASHBOARD_ENABLED":               "false",
		"DEMOSVC_BOOTSTRAP_PLAN":                  "enterprise", // unlimited: the test polls its deliveries
	})
	m := firstKeyRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no API key in serve's first start output:\n%s", out.String())
	}
	api := apiCaller{t: t, base: base, key: m[1]}

	for _, r := range []struct {
		name    string
		prepare func(t *testing.T) receiverStarter
	}{
		{"go", func(*testing.T) receiverStarter { return startGoReceiver }},
		{"typescript", buildTypeScriptReceiver},
		{"python", func(t *testing.T) receiverStarter { interpreter(t, "python3"); return startPythonReceiver }},
	} {
		t.Run(r.name, func(t *testing.T) {
			start := r.prepare(t)
			api := api
			api.t = t
			proxy := &lossyProxy{seen: map[string]int{}}
			ps := httptest.NewServer(proxy)
			defer ps.Close()
			wh := api.call("POST", "/v1/webhooks", `{"url":"`+ps.URL+`/hook","events":["contact.created","demo.completed","lead.hot","meeting.booked"]}`, 201)
			webhookID, secret := wh["id"].(string), wh["secret"].(string)
			defer api.call("DELETE", "/v1/webhooks/"+webhookID, "", 204)
			log := &processedLog{}
			receiverURL := start(t, log, secret)
			proxy.setTarget(receiverURL)

			// Three events: contact.created, lead.hot, demo.completed.
			agent := api.call("POST", "/v1/agents", `{"name":"Ava","sandbox_url":"https://sandbox.example.com/ava"}`, 201)
			session := api.call("POST", "/v1/sessions", `{"agent_id":"`+agent["id"].(string)+`","contact":{"name":"Pat","email":"pat-`+r.name+`@example.com"}}`, 201)
			sessionID := session["id"].(string)
			api.call("POST", "/v1/sessions/"+sessionID+"/complete", `{"intent_score":91,"signals":{"interest":80,"objections":10,"buying_signals":90},"duration_seconds":600,"replay_url":"https://replay.example.com/1"}`, 200)
			ids := api.waitDeliveries(webhookID, 3)

			// Each event processed once, though both attempts were verified
			// and acknowledged.
			got := log.waitFor(t, 3)
			wantOnce(t, got, ids)
			attempts := map[string][]int{}
			for _, x := range proxy.recorded() {
				id := x.header.Get("X-Service-Event-Id")
				if x.header.Get("webhook-id") != id {
					t.Errorf("webhook-id %q differs from X-Service-Event-Id %q", x.header.Get("webhook-id"), id)
				}
				attempts[id] = append(attempts[id], x.status)
			}
			for event, id := range ids {
				if !slices.Equal(attempts[id], []int{200, 200}) {
					t.Errorf("%s (%s): the receiver answered the attempts %v, want [200 200]", event, id, attempts[id])
				}
			}

			// Forged and replayed copies of a real delivery, sent to the
			// receiver directly.
			real := proxy.recorded()[0]
			forge := func(name string, want int, edit func(h http.Header, body []byte) []byte) {
				t.Helper()
				h := real.header.Clone()
				body := edit(h, slices.Clone(real.body))
				if got := send(receiverURL, h, body); got != want {
					t.Errorf("%s: the receiver answered %d, want %d", name, got, want)
				}
			}
			resign := func(h http.Header, body []byte, ts int64, secret string) {
				sig, err := delivery.StandardSignature(secret, h.Get("webhook-id"), ts, body)
				if err != nil {
					t.Fatal(err)
				}
				h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
				h.Set("webhook-signature", sig)
			}
			other := "whsec_" + strings.Repeat("A", 43) + "="
			forge("a body changed by one byte", 401, func(h http.Header, b []byte) []byte {
				b[len(b)-2] ^= 1
				return b
			})
			forge("no X-Service-Signature", 401, func(h http.Header, b []byte) []byte { h.Del("X-Service-Signature"); return b })
			forge("X-Service-Signature keyed with another secret", 401, func(h http.Header, b []byte) []byte {
				h.Set("X-Service-Signature", delivery.Signature(other, b))
				return b
			})
			forge("no webhook-signature", 401, func(h http.Header, b []byte) []byte { h.Del("webhook-signature"); return b })
			forge("webhook-signature keyed with another secret", 401, func(h http.Header, b []byte) []byte {
				resign(h, b, time.Now().Unix(), other)
				return b
			})
			forge("a webhook-timestamp 10 minutes old, rightly signed", 401, func(h http.Header, b []byte) []byte {
				resign(h, b, time.Now().Add(-10*time.Minute).Unix(), secret)
				return b
			})
			forge("the real delivery again, freshly signed (a duplicate)", 200, func(h http.Header, b []byte) []byte {
				resign(h, b, time.Now().Unix(), secret)
				return b
			})

			// One more real event: it comes after all of the above, so had
			// any of them been processed it would show before it.
			api.call("POST", "/v1/sessions/"+sessionID+"/meeting", `{"scheduled_at":"2026-12-01T10:00:00Z","calendar_link":"https://cal.example.com/1"}`, 200)
			ids = api.waitDeliveries(webhookID, 4)
			got = log.waitFor(t, 4)
			wantOnce(t, got, ids)
			if last := got[len(got)-1]; last.event != "meeting.booked" {
				t.Errorf("the last event processed is %v, want meeting.booked", last)
			}

			// A rotation. During the overlap X-Service-Signature is the
			// previous secret's and webhook-signature carries both: a
			// receiver given both secrets verifies every delivery (each
			// succeeds at its second attempt), whichever it tries first.
			// After the overlap the new secret alone does.
			newContact := func(n int) {
				api.call("POST", "/v1/sessions", `{"agent_id":"`+agent["id"].(string)+`","contact":{"name":"Pat","email":"pat-`+r.name+strconv.Itoa(n)+`@example.com"}}`, 201)
			}
			rotated := api.call("POST", "/v1/webhooks/"+webhookID+"/rotate-secret", `{"previous_expires_in":3600}`, 200)["secret"].(string)
			during := &processedLog{}
			proxy.setTarget(start(t, during, rotated, secret))
			newContact(2)
			api.waitDeliveries(webhookID, 5)
			if got := during.waitFor(t, 1); got[0].event != "contact.created" {
				t.Errorf("during the overlap the receiver processed %v, want a contact.created", got)
			}
			last := api.call("POST", "/v1/webhooks/"+webhookID+"/rotate-secret", `{"previous_expires_in":0}`, 200)["secret"].(string)
			after := &processedLog{}
			proxy.setTarget(start(t, after, last))
			newContact(3)
			api.waitDeliveries(webhookID, 6)
			if got := after.waitFor(t, 1); got[0].event != "contact.created" {
				t.Errorf("after the overlap the receiver processed %v, want a contact.created", got)
			}
		})
	}
}

// receiverStarter starts a receiver snippet that verifies deliveries with
// secrets and records what it processes in log, and returns its URL.
type receiverStarter func(t *testing.T, log *processedLog, secrets ...string) string

// wantOnce checks that got holds each event of ids (event name → id) once
// and nothing else.
func wantOnce(t *testing.T, got []snippetEvent, ids map[string]string) {
	t.Helper()
	var want []snippetEvent
	for event, id := range ids {
		want = append(want, snippetEvent{id: id, event: event})
	}
	sorted := slices.Clone(got)
	cmp := func(a, b snippetEvent) int { return strings.Compare(a.id, b.id) }
	slices.SortFunc(sorted, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(sorted, want) {
		t.Errorf("the receiver processed %v, want each of %v once", got, want)
	}
}

func startGoReceiver(t *testing.T, log *processedLog, secrets ...string) string {
	h, err := receivers.Handler(secrets, func(id string, e receivers.Event) error {
		log.add(snippetEvent{id: id, event: e.Event})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL + "/hook"
}

// interpreter finds a program the snippets need, or skips the test when it
// is missing outside CI; in CI (CI=true) a missing one fails.
func interpreter(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed, and CI=true: the receiver snippets must run (.ci/run installs it)", name)
			}
			t.Skipf("%s is not installed: skipping this receiver snippet (it never skips with CI=true)", name)
		}
	}
}

// startScript runs a receiver script, whose first line of output is
// "listening on URL" and every later line one processed event as JSON, and
// returns the URL.
func startScript(t *testing.T, secrets []string, log *processedLog, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+strings.Join(secrets, " "))
	cmd.Stderr = &testWriter{t: t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	listening := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if url, ok := strings.CutPrefix(line, "listening on "); ok {
				listening <- url
				continue
			}
			var p struct{ Processed, Event string }
			if err := json.Unmarshal([]byte(line), &p); err != nil || p.Processed == "" {
				t.Errorf("the receiver printed %q, not a processed event", line)
				continue
			}
			log.add(snippetEvent{id: p.Processed, event: p.Event})
		}
		cmd.Wait()
	}()
	select {
	case url := <-listening:
		return url + "/hook"
	case <-exited:
		t.Fatalf("%s exited before listening", name)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not listening after 30s", name)
	}
	return ""
}

// testWriter logs a child's stderr into the test's output.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("receiver stderr: %s", bytes.TrimSpace(p))
	return len(p), nil
}

func startPythonReceiver(t *testing.T, log *processedLog, secrets ...string) string {
	return startScript(t, secrets, log, "python3", "docs/receivers/receiver.py")
}

// buildTypeScriptReceiver compiles the TypeScript snippet once for a test,
// and returns what starts it.
func buildTypeScriptReceiver(t *testing.T) receiverStarter {
	interpreter(t, "node", "npm")
	modules := receiverNodeModules(t)
	dir := t.TempDir()
	for _, f := range []string{"receiver.ts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join("docs/receivers", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	tsc := exec.Command("node", filepath.Join(modules, "typescript/bin/tsc"), "-p", dir, "--outDir", filepath.Join(dir, "out"))
	if b, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, b)
	}
	return func(t *testing.T, log *processedLog, secrets ...string) string {
		return startScript(t, secrets, log, "node", filepath.Join(dir, "out/receiver.js"))
	}
}

// receiverNodeModules returns the node_modules of docs/receivers' pinned
// npm packages: $DEMOSVC_RECEIVERS_NODE_MODULES, or docs/receivers/
// node_modules, which `npm ci` there installs (.ci/run does). A test makes
// no network call, so it does not install them itself: without them it
// skips, or fails with CI=true.
func receiverNodeModules(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DEMOSVC_RECEIVERS_NODE_MODULES")
	if dir == "" {
		dir = filepath.Join("docs", "receivers", "node_modules")
	}
	if _, err := os.Stat(filepath.Join(dir, "typescript", "bin", "tsc")); err != nil {
		const how = "the TypeScript receiver needs docs/receivers' npm packages: run `npm ci` in docs/receivers (.ci/run does), or set DEMOSVC_RECEIVERS_NODE_MODULES"
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (%v)", how, err)
		}
		t.Skip(how)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
