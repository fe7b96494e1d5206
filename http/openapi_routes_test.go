package http

import (
	"regexp"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIDescribesEveryRouteAndNothingElse holds ../openapi.yaml to
// the routes the server registers: every method and path it serves is an
// operation of the spec, and every operation is served (HEAD, served on
// every GET route, is left out of both).
func TestOpenAPIDescribesEveryRouteAndNothingElse(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}|:[^/]+`)
	var described []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described = append(described, method+" "+param.ReplaceAllString(path, "{}"))
		}
	}
	ts := newTestServer(t, nil)
	var served []string
	for _, r := range ts.Server.routes().(*router).served {
		served = append(served, param.ReplaceAllString(r, "{}"))
	}
	slices.Sort(described)
	slices.Sort(served)
	for _, r := range served {
		if !slices.Contains(described, r) {
			t.Errorf("%s is served but not described in openapi.yaml", r)
		}
	}
	for _, d := range described {
		if !slices.Contains(served, d) {
			t.Errorf("%s is described in openapi.yaml but not served", d)
		}
	}
	if len(served) < 29 {
		t.Errorf("served routes %v: want the API's 29 at least", served)
	}
}

// Every operation that takes a body reads it through http.max_body_bytes,
// so it declares the 413 a larger one gets (the retry of a delivery, whose
// body is optional, did not).
func TestOpenAPIDeclaresTooLargeWhereABodyIsRead(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil {
				continue
			}
			n++
			if op.Responses.Status(413) == nil {
				t.Errorf("%s %s takes a body but does not declare 413", method, path)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d operations with a body: want the API's", n)
	}
}
