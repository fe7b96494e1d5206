package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"demosvc/eventlog"
)

// TestIdempotentAnswersReplayTheirStatusAndBodyAcrossARestart records a
// refusal (409) and a creation (201) under two keys, changes what a new
// request would get, restarts on the same data dir, and expects each retry
// to get the first status and the first bytes, with nothing appended.
func TestIdempotentAnswersReplayTheirStatusAndBodyAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	ts := openTestServer(t, dir, nil)
	key := ts.key
	send := func(ts *testServer, method, path, body, idemKey string) *httptest.ResponseRecorder {
		t.Helper()
		h := []string{"Content-Type", "application/json"}
		if idemKey != "" {
			h = append(h, "Idempotency-Key", idemKey)
		}
		ts.key = key
		return ts.do(method, path, body, h...)
	}
	w := send(ts, "POST", "/v1/agents", `{"name":"Ava","sandbox_url":"https://s.example.com"}`, "")
	var agent struct{ ID string }
	if err := json.Unmarshal(w.Body.Bytes(), &agent); err != nil || w.Code != http.StatusCreated {
		t.Fatalf("creating an agent: %d %s", w.Code, w.Body)
	}
	setStatus := func(ts *testServer, status string) {
		if w := send(ts, "PATCH", "/v1/agents/"+agent.ID, `{"status":"`+status+`"}`, ""); w.Code != http.StatusOK {
			t.Fatalf("PATCH status %s: %d %s", status, w.Code, w.Body)
		}
	}
	start := `{"agent_id":"` + agent.ID + `","contact":{"name":"Pat","email":"pat@example.com"}}`

	setStatus(ts, "inactive")
	refused := send(ts, "POST", "/v1/sessions", start, "refused")
	if refused.Code != http.StatusConflict {
		t.Fatalf("starting a session of an inactive agent: %d %s", refused.Code, refused.Body)
	}
	setStatus(ts, "active")
	created := send(ts, "POST", "/v1/sessions", start, "created")
	if created.Code != http.StatusCreated {
		t.Fatalf("starting a session: %d %s", created.Code, created.Body)
	}
	check := func(when string, ts *testServer) {
		t.Helper()
		for _, first := range []struct {
			key string
			w   *httptest.ResponseRecorder
		}{{"refused", refused}, {"created", created}} {
			again := send(ts, "POST", "/v1/sessions", start, first.key)
			if again.Code != first.w.Code || again.Body.String() != first.w.Body.String() {
				t.Errorf("%s, the retry of %q got %d %s; want %d %s", when, first.key, again.Code, again.Body, first.w.Code, first.w.Body)
			}
		}
		list := send(ts, "GET", "/v1/sessions", "", "")
		var page struct{ Data []json.RawMessage }
		if err := json.Unmarshal(list.Body.Bytes(), &page); err != nil || len(page.Data) != 1 {
			t.Errorf("%s: sessions %s, want the one created", when, list.Body)
		}
	}
	check("before a restart", ts)
	ts.close()
	check("after a restart", openTestServer(t, dir, nil))
}

// TestASealedAnswerUnderAnotherMasterKeyIsAnErrorObject: a webhook's
// registration, retried after the data dir's master key changed, cannot
// replay its sealed answer; it gets a 409 error object saying why (it
// was a panic on a status read from the ciphertext), and nothing is
// registered twice.
func TestASealedAnswerUnderAnotherMasterKeyIsAnErrorObject(t *testing.T) {
	dir := t.TempDir()
	ts := openTestServer(t, dir, nil)
	key := ts.key
	const body = `{"url":"https://hooks.example.com/x","events":["lead.hot"]}`
	const n = 20 // each answer's ciphertext is random: several, so that one passing by chance is unlikely
	for i := range n {
		if w := ts.do("POST", "/v1/webhooks", body, "Content-Type", "application/json", "Idempotency-Key", fmt.Sprint("wh", i)); w.Code != http.StatusCreated {
			t.Fatalf("registering webhook %d: %d %s", i, w.Code, w.Body)
		}
	}
	ts.close()
	other := openTestServerKeyed(t, dir, nil, eventlog.StoreOptions{}, bytes.Repeat([]byte{8}, 32))
	other.key = key
	for i := range n {
		w := other.do("POST", "/v1/webhooks", body, "Content-Type", "application/json", "Idempotency-Key", fmt.Sprint("wh", i))
		var e ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusConflict || e.Error.Code != "idempotency_conflict" ||
			!strings.Contains(e.Error.Message, "does not open under this data dir's master key") {
			t.Fatalf("retry %d under another master key: %d %q; want 409 idempotency_conflict saying why", i, w.Code, w.Body)
		}
	}
	list := other.do("GET", "/v1/webhooks?limit=100", "")
	var page struct{ Data []json.RawMessage }
	if err := json.Unmarshal(list.Body.Bytes(), &page); err != nil || len(page.Data) != n {
		t.Errorf("webhooks after the retries: %d, %v; want the %d registered once each", len(page.Data), err, n)
	}
}

// TestAnIdempotencyKeyIsAtMost255Characters: the limit counts characters,
// as documented, not bytes.
func TestAnIdempotencyKeyIsAtMost255Characters(t *testing.T) {
	ts := newTestServer(t, nil)
	const body = `{"name":"Ava","sandbox_url":"https://s.example.com"}`
	for i, tc := range []struct {
		key  string
		code int
	}{
		{strings.Repeat("é", 255), http.StatusCreated},
		{strings.Repeat("k", 255), http.StatusCreated},
		{strings.Repeat("é", 256), http.StatusBadRequest},
		{strings.Repeat("k", 256), http.StatusBadRequest},
	} {
		w := ts.do("POST", "/v1/agents", body, "Content-Type", "application/json", "Idempotency-Key", tc.key)
		if w.Code != tc.code || tc.code == http.StatusBadRequest && !strings.Contains(w.Body.String(), "at most 255 characters") {
			t.Errorf("case %d, a key of %d characters (%d bytes): %d %s; want %d", i, len([]rune(tc.key)), len(tc.key), w.Code, w.Body, tc.code)
		}
	}
}

// Two Idempotency-Key headers are refused, and change nothing: a retry
// carrying either one alone must not find an answer recorded under it.
func TestTwoIdempotencyKeysAreRefused(t *testing.T) {
	ts := newTestServer(t, nil)
	const body = `{"name":"Ava","sandbox_url":"https://s.example.com"}`
	req := httptest.NewRequest("POST", "/v1/agents", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ts.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header["Idempotency-Key"] = []string{"a", "b"}
	w := httptest.NewRecorder()
	ts.ServeHTTP(w, req)
	if e := errorOf(t, w); w.Code != http.StatusBadRequest || e.Param != "Idempotency-Key" || !strings.Contains(e.Message, "one Idempotency-Key header") {
		t.Fatalf("two keys: %d %+v; want 400 invalid_request on Idempotency-Key", w.Code, e)
	}
	if list := ts.do("GET", "/v1/agents", ""); strings.Contains(list.Body.String(), "agt_") {
		t.Errorf("a refused request made an agent: %s", list.Body)
	}
	first := ts.do("POST", "/v1/agents", body, "Content-Type", "application/json", "Idempotency-Key", "a")
	second := ts.do("POST", "/v1/agents", body, "Content-Type", "application/json", "Idempotency-Key", "b")
	if first.Code != http.StatusCreated || second.Code != http.StatusCreated || first.Body.String() == second.Body.String() {
		t.Errorf("keys a and b alone: %d %s and %d %s; want two new agents", first.Code, first.Body, second.Code, second.Body)
	}
}
