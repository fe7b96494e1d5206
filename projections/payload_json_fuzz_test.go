package projections

import (
	"reflect"
	"testing"

	"demosvc/eventlog/strictjson"
)

// FuzzPayloadsDecodeAlikeOnBothPaths holds strictjson.DecodeObject's
// one-pass path to its checked two-pass path on every event payload type,
// as an imported record's data is decoded (Registry.PayloadFromJSON): the
// same input is accepted or refused by both, and decodes to the same value.
func FuzzPayloadsDecodeAlikeOnBothPaths(f *testing.F) {
	for _, s := range []string{
		`{"session_id":"ses_01","agent_id":"agt_01","contact_id":"con_01","status":"active"}`,
		`{"account_id":"acc_01","name":"Acme","plan":"pro","created_at":"2026-11-22T12:00:00Z"}`,
		`{"intent_score":87,"signals":{"questions_asked":3,"features_explored":5,"time_on_pricing_seconds":40}}`,
		`{"scheduled_at":"2026-12-01T15:00:00.123456789+01:00"}`, `{"events":["lead.hot"],"url":"https://x.example.com/"}`,
		`{"created_at":"2026-11-22T12:00:00"}`, `{"intent_score":1e2}`, `{"name":null}`, `{"Name":"x"}`,
	} {
		f.Add([]byte(s))
	}
	r := NewRegistry()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range r.Types() {
			one, err := r.New(name, r.Latest(name))
			if err != nil {
				t.Fatal(err)
			}
			checked, _ := r.New(name, r.Latest(name))
			err = strictjson.DecodeObject(data, one)
			checkedErr := strictjson.DecodeChecked(data, checked)
			if (err == nil) != (checkedErr == nil) {
				t.Fatalf("%s %q: DecodeObject says %v, the checked path %v", name, data, err, checkedErr)
			}
			if err == nil && !reflect.DeepEqual(one, checked) {
				t.Fatalf("%s %q: DecodeObject decoded %+v, the checked path %+v", name, data, one, checked)
			}
		}
	})
}
