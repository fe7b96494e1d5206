package http

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"unicode/utf8"

	"demosvc/projections"
)

// Default and largest page sizes.
const (
	defaultLimit = 20
	maxLimit     = 100
)

// listSpec is what one list accepts in its query string besides limit
// and starting_after: the id prefix of its items (starting_after must be
// one) and the names of its filters.
type listSpec struct {
	idPrefix string
	filters  []string
}

// listQuery is a list's query, validated: Filters holds each filter given.
type listQuery struct {
	projections.ListQuery
	Filters map[string]string
	// params is the query as parsed, what the next page's link carries.
	params url.Values
}

// parseListQuery reads the raw query string of a list request, the one way
// every list reads it. It refuses, naming the parameter: a query string
// that does not parse (a bad %-escape, a ';' separator), a name or value
// that is not UTF-8, a parameter given twice, a name the list does not
// take, a filter given empty (left out, it filters nothing; given, it
// would filter by nothing), a limit that is not a plain integer from 1 to
// maxLimit, and a starting_after that is not an id of the list's kind
// (given in canonical lowercase form after this). Nothing of a refused
// query is used. With
// more than one fault, the parameter first in name order is the one
// named, so that one query always gets one answer.
func parseListQuery(raw string, spec listSpec) (listQuery, error) {
	q := listQuery{ListQuery: projections.ListQuery{Limit: defaultLimit}, Filters: map[string]string{}}
	values, err := url.ParseQuery(raw)
	if err != nil {
		return q, malformedQuery(err)
	}
	q.params = values
	for _, name := range slices.Sorted(maps.Keys(values)) {
		vs := values[name]
		if !utf8.ValidString(name) {
			return q, apiError(projections.EInvalid, "", "a query parameter name is not valid UTF-8")
		}
		known := name == "limit" || name == "starting_after" || slices.Contains(spec.filters, name)
		if !known {
			return q, apiError(projections.EInvalid, name, "unknown query parameter %q; this list takes %s", name, accepted(spec))
		}
		if len(vs) > 1 {
			return q, apiError(projections.EInvalid, name, "%s may be given once, got %d values", name, len(vs))
		}
		v := vs[0]
		if !utf8.ValidString(v) {
			return q, apiError(projections.EInvalid, name, "%s must be valid UTF-8", name)
		}
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxLimit || v != strconv.Itoa(n) {
				return q, apiError(projections.EInvalid, "limit", "limit must be an integer from 1 to %d, got %q", maxLimit, v)
			}
			q.Limit = n
		case "starting_after":
			id, ok := projections.ParseID(spec.idPrefix, v)
			if !ok {
				return q, apiError(projections.EInvalid, "starting_after", "starting_after must be an id %s…, got %q", spec.idPrefix, v)
			}
			q.StartingAfter = projections.FormatID(spec.idPrefix, id)
		default:
			if v == "" {
				return q, apiError(projections.EInvalid, name, "%s must not be empty; leave it out to list without it", name)
			}
			q.Filters[name] = v
		}
	}
	return q, nil
}

// accepted lists the parameters a list takes, for an error message.
func accepted(spec listSpec) string {
	s := "limit, starting_after"
	for _, f := range spec.filters {
		s += ", " + f
	}
	return s
}

// wellFormedQuery guards every route but the lists, none of which takes a
// query parameter: it answers 400 for a query string that does not parse,
// rather than letting net/url drop what it cannot read, and for any
// parameter, named, as a list does for one it does not take (a typo is
// not silently ignored). A list's handler parses its query once, with
// parseListQuery, which refuses the same way.
func (s *Server) wellFormedQuery(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery == "" {
			h(w, r)
			return
		}
		values, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			s.writeError(w, r, malformedQuery(err))
			return
		}
		if len(values) > 0 {
			// The first in name order, so that one query gets one answer.
			name := slices.Min(slices.Collect(maps.Keys(values)))
			if !utf8.ValidString(name) {
				s.writeError(w, r, apiError(projections.EInvalid, "", "a query parameter name is not valid UTF-8"))
				return
			}
			s.writeError(w, r, apiError(projections.EInvalid, name,
				"unknown query parameter %q; %s %s takes no query parameters", name, r.Method, r.URL.Path))
			return
		}
		h(w, r)
	}
}

func malformedQuery(err error) error {
	return apiError(projections.EInvalid, "", "the query string is malformed (%v); escape reserved characters and separate parameters with &", err)
}
