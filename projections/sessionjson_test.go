package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
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

func TestAppendStringEscapesAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		"", "plain", "https://replay.example.com/s?a=1&b=<2>\"\\\n\t\x01\u2028é\xff", "\u2029\b\f\r", "日本語",
	} {
		if got, want := appendString(nil, in), encodingJSON(t, in); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got  %s\n want %s", in, got, want)
		}
	}
}

func TestSessionJSONFromTheStateMatchesItsView(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	ag := e.agent(pr, "ava")
	url := "https://replay.example.com/é?q=\"x\"&<y>"
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, e.session(pr, ag.ID, fmt.Sprintf("p%d@example.com", i)).ID)
	}
	s, d := 77, 600
	e.p.CompleteSession(t.Context(), pr, ids[1], Figures{IntentScore: &s, Signals: &Signals{1, 2, 3}, DurationSeconds: &d, ReplayURL: &url}, nil)
	e.p.AbandonSession(t.Context(), pr, ids[2], Figures{}, nil)
	e.p.BookMeeting(t.Context(), pr, ids[3], MeetingInput{ScheduledAt: "2026-12-01T10:00:00Z", CalendarLink: "https://cal.example.com"}, nil)
	for _, id := range ids {
		got, err := e.p.SessionJSON(pr.Account.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := e.p.Session(pr.Account.ID, id)
		if want := encodingJSON(t, v); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got  %s\n want %s", id, got, want)
		}
	}
	q := ListQuery{Limit: 3}
	got, last, more, err := e.p.SessionsJSON(pr.Account.ID, SessionFilter{}, q)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := e.p.Sessions(pr.Account.ID, SessionFilter{}, q)
	if want := encodingJSON(t, page); !bytes.Equal(got, want) || !more || last != page.Data[2].ID {
		t.Errorf("page:\n got  %s (last %s, more %v)\n want %s", got, last, more, want)
	}
}
