package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// openAPIYAML is the API's description, which every response of the script
// suite must match.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// apiSpec is openapi.yaml loaded, validated and routed.
type apiSpec struct {
	router routers.Router
	// errorSchema is components.schemas.Error, for the error bodies of
	// routes the spec does not describe (unknown paths, wrong methods).
	errorSchema *openapi3.Schema
	// requestID is components.headers.X-Request-Id, which every response
	// carries, described route or not.
	requestID *openapi3.Header
}

var (
	specOnce sync.Once
	spec     *apiSpec
	specErr  error
)

// loadSpec loads openapi.yaml once; a failure is returned to every caller.
func loadSpec() (*apiSpec, error) {
	specOnce.Do(func() { spec, specErr = parseSpec(openAPIYAML) })
	return spec, specErr
}

// parseSpec loads and validates an OpenAPI document and builds its router.
// The document's server is relative ("/"), so the router matches a request
// to any host, such as the scripts' 127.0.0.1 on a random port.
func parseSpec(data []byte) (*apiSpec, error) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	loader.Context = ctx
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: loading: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("openapi.yaml: not a valid OpenAPI document: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: building the router: %w", err)
	}
	s := &apiSpec{router: router}
	if ref := doc.Components.Schemas["Error"]; ref != nil {
		s.errorSchema = ref.Value
	}
	if ref := doc.Components.Headers["X-Request-Id"]; ref != nil {
		s.requestID = ref.Value
	}
	if s.errorSchema == nil || s.requestID == nil || s.requestID.Schema == nil {
		return nil, errors.New("openapi.yaml: components.schemas.Error and components.headers.X-Request-Id are required")
	}
	return s, nil
}

// checkOpenAPI validates one request and response of the script suite
// against openapi.yaml. The response is validated whenever its route is in
// the spec (status, declared headers, body); the request only when the
// response is 2xx, since scripts send bad requests on purpose. For a route
// the spec does not describe, an error response must still be the Error
// object, and anything else passes. resp.Body has been read: respBody is
// its content.
func checkOpenAPI(req *http.Request, reqBody string, resp *http.Response, respBody []byte) error {
	s, err := loadSpec()
	if err != nil {
		return err
	}
	return s.check(req, reqBody, resp.StatusCode, resp.Header, respBody)
}

// check validates one exchange; see checkOpenAPI.
func (s *apiSpec) check(req *http.Request, reqBody string, status int, header http.Header, respBody []byte) error {
	ctx := context.Background()
	// The client consumed req.Body: validate a copy that carries it again.
	r := req.Clone(ctx)
	r.Body = io.NopCloser(strings.NewReader(reqBody))
	r.ContentLength = int64(len(reqBody))

	route, pathParams, err := s.router.FindRoute(r)
	if errors.Is(err, routers.ErrPathNotFound) || errors.Is(err, routers.ErrMethodNotAllowed) {
		return s.checkUndescribed(r, status, header, respBody)
	}
	if err != nil {
		return fmt.Errorf("finding the route: %w", err)
	}

	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.WithStringFormatValidator("uri", uriFormat),
			openapi3.WithStringFormatValidator("email", emailFormat),
		},
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: pathParams, Route: route, Options: opts}
	if status >= 200 && status < 300 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return fmt.Errorf("request (answered %d): %w", status, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Options:                opts,
	}
	out.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("response %d: %w", status, err)
	}
	return nil
}

// checkUndescribed validates the response to a route the spec does not
// describe (an unknown path, a wrong method): an error is the Error object
// and, as every response of the API, carries X-Request-Id; a success under
// /v1 (but for HEAD, served on every GET route) is an error of the spec;
// anything else passes.
func (s *apiSpec) checkUndescribed(req *http.Request, status int, header http.Header, respBody []byte) error {
	if status < 400 {
		if strings.HasPrefix(req.URL.Path, "/v1/") && req.Method != http.MethodHead {
			// An API route that answers but is not in the spec.
			return fmt.Errorf("%s %s answered %d, but openapi.yaml does not describe it", req.Method, req.URL.Path, status)
		}
		return nil
	}
	if err := s.checkRequestID(header); err != nil {
		return fmt.Errorf("response %d to a route not in the spec: %w", status, err)
	}
	if mt, _, err := mime.ParseMediaType(header.Get("Content-Type")); err != nil || mt != "application/json" {
		return fmt.Errorf("response %d to a route not in the spec: Content-Type %q, want application/json", status, header.Get("Content-Type"))
	}
	var body any
	if err := json.Unmarshal(respBody, &body); err != nil {
		return fmt.Errorf("response %d to a route not in the spec: body is not JSON: %w", status, err)
	}
	if err := s.errorSchema.VisitJSON(body, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("response %d to a route not in the spec: body is not the Error object: %w", status, err)
	}
	return nil
}

func (s *apiSpec) checkRequestID(header http.Header) error {
	v := header.Get("X-Request-Id")
	if v == "" {
		return errors.New("response has no X-Request-Id")
	}
	if err := s.requestID.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("X-Request-Id %q: %w", v, err)
	}
	return nil
}

// uriFormat enforces format "uri": an absolute URL (RFC 3986), which
// kin-openapi leaves unchecked by default.
var uriFormat = openapi3.NewCallbackValidator(func(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("not a URI: %w", err)
	}
	if !u.IsAbs() {
		return errors.New("not an absolute URI")
	}
	return nil
})

// emailFormat enforces format "email": a bare addr-spec (RFC 5322), which
// kin-openapi leaves unchecked by default.
var emailFormat = openapi3.NewCallbackValidator(func(v string) error {
	a, err := mail.ParseAddress(v)
	if err != nil || a.Address != v {
		return errors.New("not a bare e-mail address")
	}
	return nil
})

func TestOpenAPISpecIsValid(t *testing.T) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("openapi.yaml")
	if err != nil {
		t.Fatalf("loading openapi.yaml: %v", err)
	}
	if got := doc.OpenAPI; got != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", got)
	}
	if err := doc.Validate(ctx, openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("openapi.yaml is not valid: %v", err)
	}
	// Every route the server registers is described, and nothing else:
	// http's TestOpenAPIDescribesEveryRouteAndNothingElse, against its router.
	// As many error codes as projections/errors.go and http/errors.go (with
	// http/plainerrors.go's three and the 505 it names from net/http's
	// status) have.
	codes := doc.Components.Schemas["ErrorCode"].Value.Enum
	if len(codes) != 17 {
		t.Errorf("ErrorCode has %d codes, want the 17 of projections/errors.go, http/errors.go and http/plainerrors.go", len(codes))
	}
}

// TestOpenAPIValidatorCanFail proves the hook rejects what the spec rules
// out, so a green script suite means something.
func TestOpenAPIValidatorCanFail(t *testing.T) {
	s, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	const (
		agt     = "agt_01m7yzmhg079h0x8tcphavzkm3"
		ses     = "ses_01m7yzmhg0s320jxhwhat1naxd"
		reqID   = "req_01m7yzmhg079h0x8tcphavzkm3"
		updated = `{"id":"` + agt + `","name":"Ava","sandbox_url":"https://sandbox.example.com/ava","status":"inactive","created_at":"2026-11-21T12:00:00Z","updated_at":"2026-11-21T12:00:00Z"}`
		session = `{"id":"` + ses + `","agent_id":"` + agt + `","contact_id":"cnt_01m7yzmhg0s320jxhwhe6vs2ze","status":"in_progress","intent_score":0,"duration_seconds":0,"meeting_booked":false,"replay_url":null,"signals":{"interest":0,"objections":0,"buying_signals":0},"started_at":"2026-11-21T12:00:00Z","ended_at":null}`
	)
	header := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {reqID}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	request := func(method, path, body string) *http.Request {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		r, err := http.NewRequest(method, "http://127.0.0.1:41234"+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer sk_test")
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		return r
	}
	patch := `{"status":"inactive","persona":"Terse."}`
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		reqBody string
		status  int
		header  http.Header
		body    string
		wantErr bool
	}{
		{name: "update response without persona passes", method: "PATCH", path: "/v1/agents/" + agt, reqBody: patch,
			status: 200, header: header(), body: updated},
		{name: "update response with persona fails", method: "PATCH", path: "/v1/agents/" + agt, reqBody: patch,
			status: 200, header: header(), wantErr: true,
			body: strings.Replace(updated, `"status"`, `"persona":"Terse.","status"`, 1)},
		{name: "get agent without persona fails", method: "GET", path: "/v1/agents/" + agt,
			status: 200, header: header(), body: updated, wantErr: true},
		{name: "missing X-Request-Id fails", method: "PATCH", path: "/v1/agents/" + agt, reqBody: patch,
			status: 200, header: http.Header{"Content-Type": {"application/json"}}, body: updated, wantErr: true},
		{name: "session in progress passes", method: "GET", path: "/v1/sessions/" + ses,
			status: 200, header: header(), body: session},
		{name: "session with fractional timestamp fails", method: "GET", path: "/v1/sessions/" + ses,
			status: 200, header: header(), wantErr: true,
			body: strings.Replace(session, `"2026-11-21T12:00:00Z"`, `"2026-11-21T12:00:00.5Z"`, 1)},
		{name: "session with score over 100 fails", method: "GET", path: "/v1/sessions/" + ses,
			status: 200, header: header(), wantErr: true,
			body: strings.Replace(session, `"intent_score":0`, `"intent_score":101`, 1)},
		{name: "session with relative replay_url fails", method: "GET", path: "/v1/sessions/" + ses,
			status: 200, header: header(), wantErr: true,
			body: strings.Replace(session, `"replay_url":null`, `"replay_url":"/replay/1"`, 1)},
		{name: "a success on an API route the spec lacks fails", method: "GET", path: "/v1/secret",
			status: 200, header: header(), body: `{}`, wantErr: true},
		{name: "an error object on an API route the spec lacks passes", method: "GET", path: "/v1/secret",
			status: 404, header: header(), body: `{"error":{"code":"not_found","message":"no route GET /v1/secret"}}`},
		{name: "undeclared status fails", method: "GET", path: "/v1/sessions/" + ses,
			status: 418, header: header(), body: `{"error":{"code":"not_found","message":"x"}}`, wantErr: true},
		{name: "status with another code fails", method: "GET", path: "/v1/sessions/" + ses,
			status: 404, header: header(), body: `{"error":{"code":"invalid_request","message":"x"}}`, wantErr: true},
		{name: "401 without WWW-Authenticate fails", method: "GET", path: "/v1/account",
			status: 401, header: header(), body: `{"error":{"code":"unauthorized","message":"invalid API key"}}`, wantErr: true},
		{name: "429 without Retry-After fails", method: "GET", path: "/v1/account",
			status: 429, header: header(), body: `{"error":{"code":"rate_limited","message":"slow down"}}`, wantErr: true},
		{name: "2xx to an invalid request fails", method: "PATCH", path: "/v1/agents/" + agt, reqBody: `{"colour":"red"}`,
			status: 200, header: header(), body: updated, wantErr: true},
		{name: "error to an invalid request passes", method: "PATCH", path: "/v1/agents/" + agt, reqBody: `{"colour":"red"}`,
			status: 400, header: header(), body: `{"error":{"code":"invalid_request","message":"unknown field \"colour\"","param":"colour"}}`},
		{name: "unknown route with error object passes", method: "GET", path: "/v1/nothing-here",
			status: 404, header: header(), body: `{"error":{"code":"not_found","message":"no route GET /v1/nothing-here"}}`},
		{name: "unknown route with another body fails", method: "GET", path: "/v1/nothing-here",
			status: 404, header: header(), body: `{"message":"not found"}`, wantErr: true},
		{name: "wrong method with unknown code fails", method: "DELETE", path: "/v1/account",
			status: 405, header: header(), body: `{"error":{"code":"nope","message":"x"}}`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.check(request(tc.method, tc.path, tc.reqBody), tc.reqBody, tc.status, tc.header, []byte(tc.body))
			if tc.wantErr && err == nil {
				t.Errorf("check passed, want a validation error")
			}
			if tc.wantErr && err != nil {
				first, _, _ := strings.Cut(err.Error(), "\n")
				t.Logf("rejected as it should be: %s", first)
			}
			if !tc.wantErr && err != nil {
				t.Errorf("check failed: %v", err)
			}
		})
	}
}

// TestOpenAPILoadFailureIsReported proves a spec that does not load or
// validate is an error, not a silent pass.
func TestOpenAPILoadFailureIsReported(t *testing.T) {
	broken := bytes.Replace(openAPIYAML, []byte(`$ref: "#/components/schemas/Session"`), []byte(`$ref: "#/components/schemas/Missing"`), 1)
	if _, err := parseSpec(broken); err == nil {
		t.Error("parseSpec accepted a spec with a dangling $ref")
	}
	if _, err := parseSpec([]byte("openapi: 3.1.0\ninfo: {}\n")); err == nil {
		t.Error("parseSpec accepted a spec without info.title")
	}
}
