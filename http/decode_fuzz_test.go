package http

import (
	"reflect"
	"testing"

	"demosvc/eventlog/strictjson"
	"demosvc/projections"
)

// bodyTypes are the types request bodies are decoded into.
var bodyTypes = []func() any{
	func() any { return new(projections.AgentInput) },
	func() any { return new(agentPatch) },
	func() any { return new(projections.SessionInput) },
	func() any { return new(projections.Figures) },
	func() any { return new(projections.MeetingInput) },
	func() any { return new(projections.WebhookInput) },
	func() any { return new(webhookPatch) },
	func() any { return new(windowInput) },
}

// FuzzBodiesDecodeAlikeOnBothPaths holds strictjson.DecodeObject's one-pass
// path to its checked two-pass path on the body types of this API: the
// same input is accepted or refused by both, and decodes to the same value.
func FuzzBodiesDecodeAlikeOnBothPaths(f *testing.F) {
	for _, s := range []string{
		`{"name":"Ava","sandbox_url":"https://sandbox.example.com/","status":"active"}`,
		`{"agent_id":"agt_01","contact":{"name":"Pat","email":"pat@example.com","company":"Initech"}}`,
		`{"agent_id":"agt_01","contact_id":"con_01"}`,
		`{"intent_score":87,"signals":{"questions_asked":3,"features_explored":5,"time_on_pricing_seconds":40},"duration_seconds":300,"replay_url":"https://r.example.com/1"}`,
		`{"signals":{"questions_asked":1.5}}`, `{"signals":{"questions_asked":1,"questions_asked":2}}`,
		`{"scheduled_at":"2026-12-01T15:00:00Z"}`, `{"scheduled_at":"2026-12-01T15:00:00+01:00"}`,
		`{"url":"https://hooks.example.com/x","events":["demo.completed","lead.hot"]}`,
		`{"description":null}`, `{"status":""}`, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`,
		`{"Name":"x"}`, `{"intent_score":1e2}`, `{"intent_score":-0}`, `{"intent_score":"5"}`,
		`{"contact":null}`, `{"events":[]}`, `{"events":[null]}`, `{} `, ` {"name":"a"}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mk := range bodyTypes {
			one, checked := mk(), mk()
			err := strictjson.DecodeObject(data, one)
			checkedErr := strictjson.DecodeChecked(data, checked)
			if (err == nil) != (checkedErr == nil) {
				t.Fatalf("%T %q: DecodeObject says %v, the checked path %v", one, data, err, checkedErr)
			}
			if err == nil && !reflect.DeepEqual(one, checked) {
				t.Fatalf("%T %q: DecodeObject decoded %+v, the checked path %+v", one, data, one, checked)
			}
		}
	})
}
