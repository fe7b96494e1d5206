package projections

import (
	"bytes"
	"encoding/json"
	"testing"
)

func encodingJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	url := "https://replay.example.com/s?a=1&b=<2>\"\\\n\t\x01\u2028é\xff"
	ended := "2026-11-21T12:00:00Z"
	views := []SessionView{
		{ID: "ses_a", AgentID: "agt_b", ContactID: "cnt_c", Status: "in_progress", StartedAt: "2026-11-21T12:00:00Z"},
		{ID: "ses_a", AgentID: "agt_b", ContactID: "cnt_c", Status: "completed", IntentScore: 91, DurationSeconds: 86400,
			MeetingBooked: true, ReplayURL: &url, Signals: Signals{1, 2, 100}, StartedAt: "x", EndedAt: &ended},
	}
	for i := range views {
		if got, want := views[i].AppendJSON(nil), encodingJSON(t, views[i]); !bytes.Equal(got, want) {
			t.Errorf("view %d:\n got  %s\n want %s", i, got, want)
		}
	}
	page := Page[SessionView]{Data: views}
	got, ok := page.AppendJSON(nil)
	if want := encodingJSON(t, page); !ok || !bytes.Equal(got, want) {
		t.Errorf("page:\n got  %s\n want %s", got, want)
	}
	empty, _ := Page[SessionView]{Data: []SessionView{}}.AppendJSON(nil)
	if string(empty) != `{"data":[]}` {
		t.Errorf("empty page = %s", empty)
	}
	if _, ok := (Page[ContactView]{Data: []ContactView{{}}}).AppendJSON(nil); ok {
		t.Error("a page of items without AppendJSON claimed to append itself")
	}
}
