package http

import (
	"reflect"
	"testing"

	"demosvc/projections"
)

// The bodies POST /v1/sessions is usually sent take the fast path; any
// other is left to the reflective decoder.
func TestSessionInputFastPathTakesPlainBodiesOnly(t *testing.T) {
	id := "con_01"
	for _, c := range []struct {
		body string
		want *projections.SessionInput // nil: left to the reflective decoder
	}{
		{`{"agent_id":"agt_01","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"}}`,
			&projections.SessionInput{AgentID: "agt_01", Contact: &projections.Contact{Name: "Pat Lee", Email: "pat@example.com", Company: "Globex"}}},
		{" {\n\t\"contact_id\" : \"con_01\" ,\r\"agent_id\":\"agt_01\" } \n",
			&projections.SessionInput{AgentID: "agt_01", ContactID: &id}},
		{`{"contact":{}}`, &projections.SessionInput{Contact: &projections.Contact{}}},
		{`{"contact":{"email":""}}`, &projections.SessionInput{Contact: &projections.Contact{}}},
		{`{}`, &projections.SessionInput{}},
		{`{"agent_id":"agt_01","agent_id":"agt_02"}`, nil}, // given twice
		{`{"contact":{"name":"a","name":"b"}}`, nil},       // given twice
		{`{"contact_id":"a","contact_id":"b"}`, nil},       // given twice
		{`{"contact":{},"contact":{}}`, nil},               // given twice
		{`{"contact":{"email":"a","email":"b"}}`, nil},     // given twice
		{`{"contact":{"company":"a","company":"b"}}`, nil}, // given twice
		{`{"agent_id":"agt_01","unknown":"x"}`, nil},       // not a member
		{`{"Agent_id":"agt_01"}`, nil},                     // another case
		{`{"agent_id":null}`, nil},                         // null
		{`{"agent_id":5}`, nil},                            // a number
		{`{"contact":{"name":"Jos\u00e9"}}`, nil},          // an escape
		{`{"contact":{"name":"José"}}`, nil},               // beyond ASCII
		{"{\"contact\":{\"name\":\"a\x7fb\"}}", nil},       // DEL
		{"{\"contact\":{\"name\":\"a\tb\"}}", nil},         // a control character
		{`{"agent_id":"agt_01"} {}`, nil},                  // trailing data
		{`{"agent_id":"agt_01",}`, nil},                    // a trailing comma
		{`{"agent_id":"agt_01"`, nil},                      // cut short
		{`[]`, nil}, {``, nil}, {`"x"`, nil}, {"\ufeff{}", nil},
	} {
		var got projections.SessionInput
		ok := decodeSessionInput([]byte(c.body), &got)
		if ok != (c.want != nil) {
			t.Errorf("%q: fast path took it: %v, want %v", c.body, ok, c.want != nil)
			continue
		}
		if ok && !reflect.DeepEqual(&got, c.want) {
			t.Errorf("%q: decoded %+v (contact %+v), want %+v", c.body, got, got.Contact, c.want)
		}
		// Every body the fast path takes, the reflective decoder decodes
		// to the same value.
		var slow projections.SessionInput
		if err := decodeReflective([]byte(c.body), &slow); ok && (err != nil || !reflect.DeepEqual(got, slow)) {
			t.Errorf("%q: the reflective decoder says %v, %+v", c.body, err, slow)
		}
	}
}

// FuzzSessionInputFastPathAgrees holds the fast path to the reflective
// decoder: whatever it takes, the reflective decoder accepts, with the
// same value.
func FuzzSessionInputFastPathAgrees(f *testing.F) {
	for _, s := range []string{
		`{"agent_id":"agt_01","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"}}`,
		`{"agent_id":"agt_01","contact_id":"con_01"}`, `{"contact":{}}`, `{}`, ` { } `,
		`{"agent_id":"a","agent_id":"b"}`, `{"contact":null}`, `{"contact":{"name":"\u00e9"}}`,
		`{"agent_id":"a"}x`, `{"contact":{"name":"a"},"contact_id":""}`,
		`{"contact_id":"a","contact_id":"b"}`, `{"contact":{},"contact":{}}`,
		`{"contact":{"email":"a","email":"b"}}`, `{"contact":{"company":"a","company":"b"}}`,
		`{"contact":{"name":"a","name":"b"}}`, " {\n\t\"contact_id\" : \"c\" ,\r\"agent_id\":\"a\" } \n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast projections.SessionInput
		if !decodeSessionInput(data, &fast) {
			return
		}
		var slow projections.SessionInput
		if err := decodeReflective(data, &slow); err != nil {
			t.Fatalf("%q: the fast path took it, the reflective decoder refused it: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: the fast path decoded %+v, the reflective decoder %+v", data, fast, slow)
		}
	})
}
