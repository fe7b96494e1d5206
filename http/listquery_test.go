package http

import (
	"net/url"
	"testing"
	"unicode/utf8"

	"demosvc/projections"
)

// FuzzListQuery feeds arbitrary query strings to the one list-query
// parser. It must never panic; a query it accepts has a limit of 1 to
// maxLimit, each parameter once, only names the list takes, a canonical
// id in starting_after, and only UTF-8.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{
		"", "limit=5", "limit=1;x=1", "%zz=1", "limit=1&limit=2", "status=active",
		"starting_after=agt_01m80s8vkm2e8k3np7nbv61qm2", "starting_after=AGT_01M80S8VKM2E8K3NP7NBV61QM2",
		"limit=%2B5", "limit=-0", "limit=99999999999999999999", "status=%ff", "=&=", "a=1&b=2",
	} {
		f.Add(s)
	}
	spec := listSpec{idPrefix: projections.PrefixAgent, filters: []string{"status"}}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseListQuery(raw, spec)
		if err != nil {
			if _, ok := shown(err); !ok {
				t.Fatalf("%q: %v is not an error object", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > maxLimit {
			t.Fatalf("%q: limit %d", raw, q.Limit)
		}
		values, perr := url.ParseQuery(raw)
		if perr != nil {
			t.Fatalf("%q accepted, but it does not parse: %v", raw, perr)
		}
		for name, vs := range values {
			if len(vs) != 1 {
				t.Fatalf("%q accepted with %s given %d times", raw, name, len(vs))
			}
			if name != "limit" && name != "starting_after" && name != "status" {
				t.Fatalf("%q accepted with unknown parameter %q", raw, name)
			}
			if !utf8.ValidString(name) || !utf8.ValidString(vs[0]) {
				t.Fatalf("%q accepted with invalid UTF-8", raw)
			}
		}
		if s := q.StartingAfter; s != "" {
			id, ok := projections.ParseID(spec.idPrefix, s)
			if !ok || projections.FormatID(spec.idPrefix, id) != s {
				t.Fatalf("%q: starting_after %q is not a canonical agent id", raw, s)
			}
		}
		if values.Has("status") != (len(q.Filters) == 1) || q.Filters["status"] != values.Get("status") {
			t.Fatalf("%q: filters %v", raw, q.Filters)
		}
	})
}

// TestListQueryNamesOneFaultAlways: a query with several faults is
// answered the same way every time, naming the parameter first in name
// order (the parameters were once checked in a map's random order).
func TestListQueryNamesOneFaultAlways(t *testing.T) {
	spec := listSpec{idPrefix: projections.PrefixAgent, filters: []string{"status"}}
	for i := 0; i < 50; i++ {
		_, err := parseListQuery("limit=0&foo=1&limit2=x&status=a&status=b", spec)
		e, ok := shown(err)
		if !ok {
			t.Fatalf("%v is not an error object", err)
		}
		if e.Param != "foo" || e.Message != `unknown query parameter "foo"; this list takes limit, starting_after, status` {
			t.Fatalf("try %d: param %q, %q; want the unknown foo, first in name order", i, e.Param, e.Message)
		}
	}
}
