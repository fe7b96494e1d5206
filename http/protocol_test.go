package http

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"demosvc/projections"
)

func TestHeadIsServedOnEveryGetRoute(t *testing.T) {
	l := serveLive(t, newTestServer(t, nil))
	agent, session := world(l)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/account", "/v1/agents", "/v1/agents/" + agent,
		"/v1/sessions", "/v1/sessions/" + session, "/v1/contacts", "/v1/webhooks"} {
		req, _ := http.NewRequest("HEAD", l.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+l.ts.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) != 0 || resp.Header.Get("Content-Type") == "" {
			t.Errorf("HEAD %s: %d, %d body bytes, Content-Type %q; want 200, no body, the GET's headers", path, resp.StatusCode, len(b), resp.Header.Get("Content-Type"))
		}
	}
	if code, _ := l.call("HEAD", "/v1/agents/agt_01m80s8vkm2e8k3np7nbv61qm2", ""); code != http.StatusNotFound {
		t.Errorf("HEAD of a missing agent: %d, want 404", code)
	}
	code, b := l.call("DELETE", "/v1/agents", "")
	if code != http.StatusMethodNotAllowed || !strings.Contains(string(b), "allowed: GET, HEAD, POST") {
		t.Errorf("DELETE /v1/agents: %d %s; want 405 listing GET, HEAD, POST", code, b)
	}
	// Without a key the same request learns nothing of the route: a 401,
	// with no Allow header naming its methods.
	req, _ := http.NewRequest("DELETE", l.url+"/v1/agents", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Allow") != "" {
		t.Errorf("DELETE /v1/agents without a key: %d, Allow %q; want 401 and no Allow", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestTwoAuthorizationHeadersAreRefused(t *testing.T) {
	l := serveLive(t, newTestServer(t, nil))
	for _, second := range []string{"Bearer " + l.ts.key, "Bearer sk_other"} {
		req, _ := http.NewRequest("GET", l.url+"/v1/account", nil)
		req.Header.Add("Authorization", "Bearer "+l.ts.key)
		req.Header.Add("Authorization", second)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest || e.Error.Code != "invalid_request" || !strings.Contains(e.Error.Message, "one Authorization header") {
			t.Errorf("two Authorization headers (%.20s…): %d %+v; want 400 invalid_request", second, resp.StatusCode, e.Error)
		}
	}
}

// TestNetHTTPsOwnAnswersAreErrorObjects sends what net/http refuses before
// any handler runs, on a listener wrapped as serve wraps it, and expects
// JSON error objects with the same statuses.
func TestNetHTTPsOwnAnswersAreErrorObjects(t *testing.T) {
	ts := newTestServer(t, nil)
	srv := httptest.NewUnstartedServer(ts)
	srv.Config.MaxHeaderBytes = 1 << 10
	srv.Listener = JSONErrorListener(srv.Listener)
	srv.Start()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name, raw string
		status    int
		code      string
	}{
		{"header block too large", "GET /v1/account HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", 431, EHeaderTooLarge},
		{"malformed header line", "GET /v1/account HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400, "invalid_request"},
		{"no Host", "GET /v1/account HTTP/1.1\r\n\r\n", 400, "invalid_request"},
		{"bad request line", "GET\r\n\r\n", 400, "invalid_request"},
		{"two Host headers", "GET /v1/account HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "invalid_request"},
		{"unknown transfer coding", "POST /v1/agents HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: zip\r\n\r\n", 501, ENotImplemented},
		{"an expectation other than 100-continue", "POST /v1/agents HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}", 417, EExpectationFailed},
		{"an expectation other than 100-continue, over HTTP/1.0", "POST /v1/agents HTTP/1.0\r\nHost: x\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}", 417, EExpectationFailed},
		{"the server-wide target with GET", "GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_request"},
		{"HTTP/2 to an HTTP/1 server", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0, ""},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		go io.WriteString(conn, tc.raw) // the server may answer before reading it all
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var e ErrorBody
		derr := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		conn.Close()
		if tc.status == 0 {
			tc.status, tc.code = resp.StatusCode, e.Error.Code
			if resp.StatusCode < 400 || resp.StatusCode >= 600 {
				t.Errorf("%s: status %d, want an error", tc.name, resp.StatusCode)
			}
		}
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || derr != nil || e.Error.Code != tc.code || e.Error.Message == "" {
			t.Errorf("%s: %d %q %+v (%v); want %d application/json with code %q", tc.name, resp.StatusCode, resp.Header.Get("Content-Type"), e.Error, derr, tc.status, tc.code)
		}
		if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") || len(id) != len("req_")+26 {
			t.Errorf("%s: X-Request-Id %q; every answer has one", tc.name, id)
		}
	}
	// Ordinary answers pass through untouched.
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "{\"status\":\"ok\"}\n" {
		t.Errorf("/healthz through the wrapped listener: %d %q", resp.StatusCode, b)
	}
}

// A body declared larger than http.max_body_bytes is refused before it is
// asked for: a client that waits for 100 Continue gets the 413 at once and
// sends nothing, where it was told to go on and then refused.
func TestADeclaredOversizedBodyIsRefusedBeforeItIsAskedFor(t *testing.T) {
	ts := newTestServer(t, nil)
	srv := httptest.NewServer(ts)
	defer srv.Close()
	// Only the head is sent: the answer must come without the body.
	resp, e := rawExchange(t, strings.TrimPrefix(srv.URL, "http://"), fmt.Sprintf("POST /v1/agents HTTP/1.1\r\nHost: x\r\n"+
		"Authorization: Bearer %s\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n",
		ts.key, ts.deps.Config.HTTP.MaxBodyBytes+1))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || e.Error.Code != EPayloadTooLarge {
		t.Errorf("first answer %d %+v; want 413 %s before the body is asked for", resp.StatusCode, e.Error, EPayloadTooLarge)
	}
}

// A path that is the API's once cleaned ("//v1/agents", "/x/../v1/…") and a
// CONNECT get the API's error object, where the dashboard mounted beside it
// would have answered them with its own pages: a redirect, a plain 405.
func TestAPIPathsHoweverWrittenAndConnectGetErrorObjects(t *testing.T) {
	ts := newTestServer(t, nil)
	d := ts.deps
	dashboardSaw := ""
	d.Dashboard = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dashboardSaw = r.Method + " " + r.URL.Path
		http.Error(w, "a dashboard page", http.StatusTeapot)
	})
	srv := httptest.NewServer(NewServer(d))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		line   string
		status int
		code   string
	}{
		{"GET //v1/agents", 401, EUnauthorized},
		{"GET /x/../v1/agents", 401, EUnauthorized},
		{"GET /v1/./agents", 401, EUnauthorized},
		{"GET /%2e%2e/v1/account", 401, EUnauthorized},
		{"CONNECT 127.0.0.1:443", 400, "invalid_request"},
		{"CONNECT /", 400, "invalid_request"},
		{"CONNECT /v1/agents", 401, EUnauthorized},
	} {
		dashboardSaw = ""
		resp, e := rawExchange(t, addr, tc.line+" HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || e.Error.Code != tc.code {
			t.Errorf("%s: %d %q %+v; want %d application/json with code %q", tc.line, resp.StatusCode,
				resp.Header.Get("Content-Type"), e.Error, tc.status, tc.code)
		}
		if dashboardSaw != "" {
			t.Errorf("%s: handed to the dashboard (%s)", tc.line, dashboardSaw)
		}
	}
	// Signed in, such a path is an unknown route of the API.
	acc, _ := ts.state.CreateAccount(t.Context(), "cli", "A", projections.PlanEnterprise, 0)
	key, _ := ts.state.CreateKey(t.Context(), "cli", acc.ID)
	resp, e := rawExchange(t, addr, "GET //v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key.Key+"\r\n\r\n")
	if resp.StatusCode != 404 || e.Error.Code != "not_found" {
		t.Errorf("GET //v1/agents signed in: %d %+v; want 404 not_found", resp.StatusCode, e.Error)
	}
	// The dashboard still gets its own paths.
	resp, err := http.Get(srv.URL + "/settings")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || dashboardSaw != "GET /settings" {
		t.Errorf("GET /settings: %d, the dashboard saw %q", resp.StatusCode, dashboardSaw)
	}
}

// rawExchange sends request as it is on a new connection to addr and
// returns the first answer, with its body read as an error object (zero
// when it is not one).
func rawExchange(t *testing.T, addr, request string) (*http.Response, ErrorBody) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, request)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%.40q: %v", request, err)
	}
	var e ErrorBody
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	return resp, e
}
