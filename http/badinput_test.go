package http

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"demosvc/config"
)

// live serves ts on a real listener on 127.0.0.1, as the binary does.
type live struct {
	t   *testing.T
	ts  *testServer
	url string
}

func serveLive(t *testing.T, ts *testServer) *live {
	t.Helper()
	srv := httptest.NewServer(ts)
	t.Cleanup(srv.Close)
	return &live{t: t, ts: ts, url: srv.URL}
}

// call sends one request with the test key (and JSON content type when
// there is a body) and returns the status and body.
func (l *live) call(method, path, body string, header ...string) (int, []byte) {
	l.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, l.url+path, rd)
	if err != nil {
		l.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+l.ts.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// mustCreate sends a creating request and returns the new id.
func (l *live) mustCreate(path, body string) string {
	l.t.Helper()
	code, b := l.call("POST", path, body)
	var v struct{ ID string }
	if err := json.Unmarshal(b, &v); err != nil || code != http.StatusCreated {
		l.t.Fatalf("POST %s: %d %s", path, code, b)
	}
	return v.ID
}

// refuses expects a 400 invalid_request naming param, with a message
// containing want, and nothing appended to the log.
func (l *live) refuses(method, path, body, param, want string, header ...string) {
	l.t.Helper()
	before := l.ts.deps.Log.DurableSeq()
	code, b := l.call(method, path, body, header...)
	var e ErrorBody
	if err := json.Unmarshal(b, &e); err != nil {
		l.t.Errorf("%s %s %.80q: body %.200q is not an error object", method, path, body, b)
		return
	}
	if code != http.StatusBadRequest || e.Error.Code != "invalid_request" || e.Error.Param != param || !strings.Contains(e.Error.Message, want) {
		l.t.Errorf("%s %s %.80q: %d %+v; want 400 invalid_request param %q message containing %q", method, path, body, code, e.Error, param, want)
	}
	if after := l.ts.deps.Log.DurableSeq(); after != before {
		l.t.Errorf("%s %s %.80q: log head %d -> %d; a refused request changed something", method, path, body, before, after)
	}
}

// world is an agent and a session in progress.
func world(l *live) (agent, session string) {
	agent = l.mustCreate("/v1/agents", `{"name":"Ava","sandbox_url":"https://s.example.com"}`)
	session = l.mustCreate("/v1/sessions", `{"agent_id":"`+agent+`","contact":{"name":"Pat","email":"pat@example.com"}}`)
	return agent, session
}

func TestNullAsTheWholeBodyIsRefused(t *testing.T) {
	l := serveLive(t, newTestServer(t, nil))
	agent, session := world(l)
	for _, path := range []string{"/progress", "/complete", "/abandon", "/meeting"} {
		l.refuses("POST", "/v1/sessions/"+session+path, `null`, "", "must be a JSON object, not null")
	}
	l.refuses("PATCH", "/v1/agents/"+agent, `null`, "", "must be a JSON object, not null")
	l.refuses("PATCH", "/v1/agents/"+agent, ` null `, "", "must be a JSON object, not null")
	l.refuses("POST", "/v1/agents", `null`, "", "must be a JSON object, not null")
}

func TestFieldNamesAreExactAndGivenOnce(t *testing.T) {
	l := serveLive(t, newTestServer(t, nil))
	agent, session := world(l)
	progress := "/v1/sessions/" + session + "/progress"
	l.refuses("POST", progress, `{"INTENT_SCORE":95}`, "INTENT_SCORE", `unknown field "INTENT_SCORE"`)
	l.refuses("POST", progress, `{"Intent_Score":95}`, "Intent_Score", `unknown field`)
	l.refuses("POST", progress, `{"intent_score":95,"intent_score":5}`, "intent_score", `duplicate field "intent_score"`)
	l.refuses("POST", progress, `{"INTENT_SCORE":95,"intent_score":5}`, "INTENT_SCORE", `unknown field`)
	l.refuses("POST", progress, `{"signals":{"interest":1,"interest":2,"objections":0,"buying_signals":0}}`, "signals.interest", `duplicate field "signals.interest"`)
	l.refuses("PATCH", "/v1/agents/"+agent, `{"NAME":"Bob"}`, "NAME", `unknown field "NAME"`)
	l.refuses("PATCH", "/v1/agents/"+agent, `{"name":"Bob","name":"Eve"}`, "name", `duplicate field "name"`)
	l.refuses("POST", "/v1/sessions", `{"agent_id":"`+agent+`","contact":{"name":"P","Email":"p@example.com"}}`, "contact.Email", `unknown field`)
	if code, b := l.call("POST", progress, `{"intent_score":95}`); code != http.StatusOK {
		t.Errorf("the exact name: %d %s", code, b)
	}
}

func TestEchoedValuesAreCapped(t *testing.T) {
	l := serveLive(t, newTestServer(t, func(c *config.Config) { c.HTTP.MaxBodyBytes = 2 << 20 }))
	_, session := world(l)
	huge := strings.Repeat("9", 1<<20)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions/" + session + "/progress", `{"intent_score":` + huge + `}`},
		{"POST", "/v1/sessions/" + session + "/progress", `{"` + huge + `":1}`},
		{"GET", "/v1/agents?limit=" + huge[:4000], ""},
		{"GET", "/v1/agents?starting_after=" + huge[:4000], ""},
		{"GET", "/v1/agents?x" + huge[:4000] + "=1", ""},
		{"GET", "/v1/agents/agt_" + huge[:4000], ""},
		{"GET", "/v1/sessions?status=" + huge[:4000], ""},
	} {
		code, b := l.call(tc.method, tc.path, tc.body)
		if code < 400 || code >= 500 {
			t.Errorf("%s %.60s: status %d, want a 4xx", tc.method, tc.path, code)
		}
		if len(b) > 1024 || !strings.Contains(string(b), "…") {
			t.Errorf("%s %.60s: %d-byte error %.300q; want the echoed value cut to 64 bytes and …", tc.method, tc.path, len(b), b)
		}
	}
}

func TestDisplayStringsRefuseControlAndBidiAndAreTrimmed(t *testing.T) {
	l := serveLive(t, newTestServer(t, nil))
	agent, _ := world(l)
	bad := []struct{ json, want string }{
		{`"Ava\u0007"`, "control characters"},
		{`"Ava\u0000"`, "control characters"},
		{`"A\nva"`, "control characters"},
		{`"\u202eavA"`, "bidirectional"},
		{`"Ava\u2066x\u2069"`, "bidirectional"},
		{`"Ava\u200f"`, "bidirectional"},
		{`"Av\u2028a"`, "invisible"},
		{`"\ufeffAva"`, "invisible"},
		{`"   "`, "blank"},
		{`"\t \u00a0"`, "blank"},
		{`"\u200b"`, "invisible characters only"},
		{`" \u200b\u2060\u00ad\u200d "`, "invisible characters only"},
		{`"Ava\ud800"`, "lone surrogate"},
		{`"\udc00"`, "lone surrogate"},
		{"\"Av\xffa\"", "UTF-8"},
	}
	for _, tc := range bad {
		l.refuses("POST", "/v1/agents", `{"name":`+tc.json+`,"sandbox_url":"https://s.example.com"}`, "name", tc.want)
		l.refuses("PATCH", "/v1/agents/"+agent, `{"name":`+tc.json+`}`, "name", tc.want)
		l.refuses("POST", "/v1/sessions", `{"agent_id":"`+agent+`","contact":{"name":`+tc.json+`,"email":"q@example.com"}}`, "contact.name", tc.want)
		l.refuses("POST", "/v1/sessions", `{"agent_id":"`+agent+`","contact":{"name":"Q","email":"q@example.com","company":`+tc.json+`}}`, "contact.company", tc.want)
	}
	// A persona is a prompt: lines and tabs stay, other controls do not.
	l.refuses("PATCH", "/v1/agents/"+agent, `{"persona":"be kind\u0007"}`, "persona", "control characters")
	l.refuses("PATCH", "/v1/agents/"+agent, `{"persona":"be \u202ekind"}`, "persona", "bidirectional")
	code, b := l.call("PATCH", "/v1/agents/"+agent, `{"name":"  Ada Lovelace \t","persona":"Line one\n\tLine two\n"}`)
	var v struct{ Name string }
	if err := json.Unmarshal(b, &v); err != nil || code != http.StatusOK || v.Name != "Ada Lovelace" {
		t.Errorf("a name with surrounding space and a multi-line persona: %d %s; want 200 and the name trimmed", code, b)
	}
	// Joiners are part of scripts and emoji.
	if code, b := l.call("PATCH", "/v1/agents/"+agent, `{"name":"می‌خواهم 👩‍💻"}`); code != http.StatusOK {
		t.Errorf("a name with joiners: %d %s", code, b)
	}
}

func TestEveryListRefusesAMalformedQuery(t *testing.T) {
	l := serveLive(t, newTestServer(t, nil))
	wh := l.mustCreate("/v1/webhooks", `{"url":"https://hooks.example.com/x","events":["demo.completed"]}`)
	lists := map[string]string{
		"/v1/agents":                         "agt_",
		"/v1/sessions":                       "ses_",
		"/v1/contacts":                       "cnt_",
		"/v1/webhooks":                       "wh_",
		"/v1/webhooks/" + wh + "/deliveries": "dlv_",
	}
	for path, prefix := range lists {
		for _, tc := range []struct{ query, param, want string }{
			{"%zz=1", "", "malformed"},
			{"limit=1;x=1", "", "malformed"},
			{"limit=1&limit=2", "limit", "once"},
			{"starting_after=" + prefix + "01m80s8vkm2e8k3np7nbv61qm2&starting_after=" + prefix + "01m80s8vkm2e8k3np7nbv61qm2", "starting_after", "once"},
			{"colour=red", "colour", `unknown query parameter "colour"`},
			{"LIMIT=5", "LIMIT", "unknown query parameter"},
			{"=1", "", "unknown query parameter"},
			{"limit=%2B5", "limit", "integer from 1 to 100"},
			{"limit=05", "limit", "integer from 1 to 100"},
			{"limit=0", "limit", "integer from 1 to 100"},
			{"limit=101", "limit", "integer from 1 to 100"},
			{"limit=", "limit", "integer from 1 to 100"},
			{"limit=%ff", "limit", "UTF-8"},
			{"starting_after=bogus", "starting_after", "must be an id " + prefix},
			{"starting_after=xyz_01m80s8vkm2e8k3np7nbv61qm2", "starting_after", "must be an id " + prefix},
			{"starting_after=" + prefix + "01m80s8vkm2e8k3np7nbv61qm2", "starting_after", "no "},
		} {
			if path == "/v1/webhooks/"+wh+"/deliveries" && tc.param == "starting_after" && tc.want == "no " {
				continue // needs the dispatcher: testdata/script/deliveries.txtar
			}
			l.refuses("GET", path+"?"+tc.query, "", tc.param, tc.want)
		}
	}
	// Any route refuses a query string it cannot read.
	agent, session := world(l)
	l.refuses("GET", "/v1/agents/"+agent+"?%zz=1", "", "", "malformed")
	l.refuses("GET", "/v1/account?a=1;b=2", "", "", "malformed")
	l.refuses("POST", "/v1/sessions/"+session+"/progress?%zz", `{"intent_score":5}`, "", "malformed")
	// And, since none but the lists takes a parameter, any it is given,
	// naming the first by name; a refused write changes nothing.
	l.refuses("GET", "/v1/account?foo=1", "", "foo", `unknown query parameter "foo"; GET /v1/account takes no query parameters`)
	l.refuses("GET", "/v1/sessions/"+session+"?limit=1&expand=agent", "", "expand", "unknown query parameter")
	l.refuses("POST", "/v1/sessions/"+session+"/progress?intent_score=90", `{"intent_score":5}`, "intent_score", "unknown query parameter")
	if _, b := l.call("GET", "/v1/sessions/"+session, ""); strings.Contains(string(b), `"intent_score":5`) {
		t.Errorf("a refused progress changed the session: %s", b)
	}
	if code, b := l.call("GET", "/v1/account?", ""); code != http.StatusOK {
		t.Errorf("GET /v1/account? (an empty query): %d %s", code, b)
	}
	// A filter's value is of its kind: an id of the wrong form or an event
	// that does not exist is refused, naming the filter; a well-formed id
	// of nothing in the account filters to an empty list.
	l.refuses("GET", "/v1/sessions?agent_id=bogus", "", "agent_id", `agent_id must be an id agt_…, got "bogus"`)
	l.refuses("GET", "/v1/sessions?contact_id="+agent, "", "contact_id", "must be an id cnt_")
	l.refuses("GET", "/v1/webhooks/"+wh+"/deliveries?event=demo.finished", "", "event", `, webhook.test, got "demo.finished"`) // the whole list
	// A filter given empty would filter by nothing: refused, as leaving it
	// out lists without it.
	for _, q := range []string{"/v1/sessions?status=", "/v1/sessions?agent_id=", "/v1/agents?status=", "/v1/contacts?email=",
		"/v1/webhooks/" + wh + "/deliveries?event=", "/v1/webhooks/" + wh + "/deliveries?status=&limit=5"} {
		param := q[strings.IndexByte(q, '?')+1 : strings.IndexByte(q, '=')]
		l.refuses("GET", q, "", param, param+" must not be empty")
	}
	if code, b := l.call("GET", "/v1/sessions?agent_id=agt_01m80s8vkm2e8k3np7nbv61qm2", ""); code != http.StatusOK || string(b) != "{\"data\":[]}\n" {
		t.Errorf("sessions of an agent that does not exist: %d %s, want 200 and an empty list", code, b)
	}
	if code, b := l.call("GET", "/v1/sessions?agent_id=agt_"+strings.ToUpper(agent[len("agt_"):]), ""); code != http.StatusOK || !strings.Contains(string(b), session) {
		t.Errorf("sessions of the agent, its id's ULID in capitals: %d %s, want 200 and its session", code, b)
	}
	// The filters a list takes are given once.
	l.refuses("GET", "/v1/sessions?status=completed&status=abandoned", "", "status", "once")
	l.refuses("GET", "/v1/agents?status=active&status=inactive", "", "status", "once")
	for _, q := range []string{"", "limit=1", "limit=100&starting_after="} {
		if code, b := l.call("GET", "/v1/agents?"+q, ""); code != http.StatusOK && !(strings.Contains(q, "starting_after=") && code == http.StatusBadRequest) {
			t.Errorf("GET /v1/agents?%s: %d %s", q, code, b)
		}
	}
}

// A time must come out as the API's timestamp and go back in through the
// log's import: a year in UTC past 9999 or before 0 is refused, as are
// offsets RFC 3339 has not (24 hours or more, 60 minutes). A URL's port
// must be one a connection can use.
func TestTimesAndPortsOutOfRangeAreRefused(t *testing.T) {
	l := serveLive(t, newTestServer(t, nil))
	agent, session := world(l)
	for _, at := range []string{"9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+00:01", "2026-12-01T10:00:00+24:00",
		"2026-12-01T10:00:00+23:60", "2026-12-01T10:00:00-00:60"} {
		l.refuses("POST", "/v1/sessions/"+session+"/meeting", `{"scheduled_at":"`+at+`","calendar_link":"https://c.example.com"}`,
			"scheduled_at", "")
	}
	for _, port := range []string{"0", "65536", "99999"} {
		l.refuses("POST", "/v1/webhooks", `{"url":"http://127.0.0.1:`+port+`/x","events":["lead.hot"]}`, "url", "port from 1 to 65535")
		l.refuses("PATCH", "/v1/agents/"+agent, `{"sandbox_url":"https://s.example.com:`+port+`/"}`, "sandbox_url", "port from 1 to 65535")
	}
	// The edges themselves are taken.
	if code, b := l.call("POST", "/v1/sessions/"+session+"/meeting", `{"scheduled_at":"9999-12-31T23:59:59+23:59","calendar_link":"https://c.example.com:65535/"}`); code != 200 || !strings.Contains(string(b), `"scheduled_at":"9999-12-31T00:00:59Z"`) {
		t.Errorf("the latest time with the largest offset and port 65535: %d %s", code, b)
	}
}
