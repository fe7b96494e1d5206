package http

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
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
