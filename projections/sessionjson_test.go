package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"demosvc/eventlog"
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

// sessionJSON is a session as the API shows it, every field.
type sessionJSON struct {
	ID              string  `json:"id"`
	AgentID         string  `json:"agent_id"`
	ContactID       string  `json:"contact_id"`
	Status          string  `json:"status"`
	IntentScore     int     `json:"intent_score"`
	DurationSeconds int     `json:"duration_seconds"`
	MeetingBooked   bool    `json:"meeting_booked"`
	ReplayURL       *string `json:"replay_url"`
	Signals         Signals `json:"signals"`
	StartedAt       string  `json:"started_at"`
	EndedAt         *string `json:"ended_at"`
	// Meeting is null until a meeting is booked (issue 12).
	Meeting *struct {
		ScheduledAt  string `json:"scheduled_at"`
		CalendarLink string `json:"calendar_link"`
	} `json:"meeting"`
}

// decodeStrictly decodes b into v, refusing a field v does not have.
func decodeStrictly(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func TestSessionJSONShowsWhatWasReported(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	ag := e.agent(pr, "ava")
	url := "https://replay.example.com/é?q=\"x\"&<y>"
	var started []sessionFields
	for i := 0; i < 5; i++ {
		started = append(started, e.session(pr, ag.ID, fmt.Sprintf("p%d@example.com", i)))
	}
	ctx := t.Context()
	score, duration := 77, 600
	answers := map[string]any{}
	var err error
	answers[started[1].ID], err = e.p.CompleteSession(ctx, pr, started[1].ID,
		Figures{IntentScore: &score, Signals: &Signals{1, 2, 3}, DurationSeconds: &duration, ReplayURL: &url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if answers[started[2].ID], err = e.p.AbandonSession(ctx, pr, started[2].ID, Figures{}, nil); err != nil {
		t.Fatal(err)
	}
	meeting := MeetingInput{ScheduledAt: "2026-12-01T10:00:00Z", CalendarLink: "https://cal.example.com"}
	if answers[started[3].ID], err = e.p.BookMeeting(ctx, pr, started[3].ID, meeting, nil); err != nil {
		t.Fatal(err)
	}

	want := func(i int, status string) sessionJSON {
		return sessionJSON{ID: started[i].ID, AgentID: ag.ID, ContactID: started[i].ContactID, Status: status}
	}
	completed := want(1, StatusCompleted)
	completed.IntentScore, completed.DurationSeconds, completed.ReplayURL, completed.Signals = 77, 600, &url, Signals{1, 2, 3}
	booked := want(3, StatusInProgress)
	booked.MeetingBooked = true
	booked.Meeting = &struct {
		ScheduledAt  string `json:"scheduled_at"`
		CalendarLink string `json:"calendar_link"`
	}{meeting.ScheduledAt, meeting.CalendarLink}
	wants := []sessionJSON{want(0, StatusInProgress), completed, want(2, StatusAbandoned), booked, want(4, StatusInProgress)}
	for i, w := range wants {
		b, err := e.p.SessionJSON(nil, pr.Account.ID, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got sessionJSON
		decodeStrictly(t, b, &got)
		if _, err := time.Parse(time.RFC3339, got.StartedAt); err != nil {
			t.Errorf("session %d: started_at %q: %v", i, got.StartedAt, err)
		}
		if ended := w.Status != StatusInProgress; (got.EndedAt != nil) != ended || (ended && *got.EndedAt < got.StartedAt) {
			t.Errorf("session %d (%s): ended_at %v, started_at %s", i, w.Status, got.EndedAt, got.StartedAt)
		}
		got.StartedAt, got.EndedAt = "", nil
		if !reflect.DeepEqual(got, w) {
			t.Errorf("session %d:\n got  %+v\n want %+v", i, got, w)
		}
		if a, ok := answers[w.ID]; ok && !bytes.Equal(a.(json.RawMessage), b) {
			t.Errorf("session %d: the command answered\n %s\nbut a read shows\n %s", i, a, b)
		}
	}

	var pages [][]string
	q := ListQuery{Limit: 3}
	for {
		body, last, more, err := e.p.SessionsJSON(nil, pr.Account.ID, SessionFilter{}, q)
		if err != nil {
			t.Fatal(err)
		}
		var page struct{ Data []sessionJSON }
		decodeStrictly(t, body, &page)
		var ids []string
		for _, s := range page.Data {
			ids = append(ids, s.ID)
		}
		pages = append(pages, ids)
		if last != ids[len(ids)-1] {
			t.Errorf("page %d: last id %s, want %s", len(pages), last, ids[len(ids)-1])
		}
		if !more {
			break
		}
		q.StartingAfter = last
	}
	wantPages := [][]string{{started[4].ID, started[3].ID, started[2].ID}, {started[1].ID, started[0].ID}}
	if !reflect.DeepEqual(pages, wantPages) {
		t.Errorf("pages %v, want %v (newest first)", pages, wantPages)
	}
}

// TestSessionAnswersReuseTheirBuffers: an answer given back with
// ReleaseAnswer becomes the buffer of a later one, so a session command
// whose caller releases its answer allocates one less; the later answers
// are whole. Anything but a session's answer is left alone.
func TestSessionAnswersReuseTheirBuffers(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	ag := e.agent(pr, "a")
	in := SessionInput{AgentID: ag.ID, Contact: &Contact{Name: "P", Email: "p@example.com"}}
	var lastV any
	start := func(release bool) float64 {
		return testing.AllocsPerRun(300, func() {
			v, err := e.p.StartSession(context.Background(), pr, in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if release {
				ReleaseAnswer(v)
			} else {
				lastV = v
			}
		})
	}
	kept, released := start(false), start(true)
	last := fields(t, lastV)
	t.Logf("%.0f allocations per command, %.0f releasing its answer", kept, released)
	if released > kept-1 && !raceEnabled {
		t.Errorf("a command whose answer is released allocates %.0f times, one that keeps it %.0f", released, kept)
	}
	// The same, seen by the buffer itself, which holds under -race too
	// (where counting allocations does not, and the pool drops a quarter
	// of what it is given): a released answer's array is a later one's.
	// One P, as AllocsPerRun has: a pool's item is kept per P.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	reused := false
	for i := 0; i < 50 && !reused; i++ {
		v, err := e.p.StartSession(context.Background(), pr, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := unsafe.SliceData(v.(json.RawMessage))
		ReleaseAnswer(v)
		if v, err = e.p.StartSession(context.Background(), pr, in, nil); err != nil {
			t.Fatal(err)
		}
		reused = unsafe.SliceData(v.(json.RawMessage)) == first
	}
	if !reused {
		t.Error("in 50 tries, no answer was given a released answer's buffer")
	}
	v, err := e.p.StartSession(context.Background(), pr, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fields(t, v); got.ID == "" || got.ID == last.ID || got.ContactID != last.ContactID {
		t.Errorf("an answer in a reused buffer reads %+v; the last kept one %+v", got, last)
	}
	ReleaseAnswer(Replay{Response: []byte("{}")}) // not a session's answer: nothing happens
}

// TestAListWithTwoFiltersExaminesABoundedNumberAPage: an agent's sessions
// of one status, among many of another, are listed in pages that each
// examine at most maxSessionsExamined sessions they do not take (the walk
// holds the read lock a write waits for); a page that found nothing says
// more remain and where the next starts, and the pages together list
// exactly the matching sessions.
func TestAListWithTwoFiltersExaminesABoundedNumberAPage(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	ag := e.agent(pr, "a")
	// Records applied to the state directly (a fixture of 25,000 sessions
	// through commands takes seconds); the state is rebuilt from the log
	// at the end, so that nothing of it is saved.
	e.p.mu.Lock()
	s := e.p.state
	seq := s.seq
	rec := func() *eventlog.Record {
		seq++
		return &eventlog.Record{Seq: seq, Time: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), Account: pr.Account.ID, Actor: "k"}
	}
	cid := e.log.IDs().New(PrefixContact)
	if err := s.apply(rec(), &ContactCreated{ContactID: cid, Contact: Contact{Name: "n", Email: "x@example.com"}}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 2*maxSessionsExamined + 500 {
		sid := e.log.IDs().New(PrefixSession)
		if err := s.apply(rec(), &SessionStarted{SessionID: sid, AgentID: ag.ID, ContactID: cid}); err != nil {
			t.Fatal(err)
		}
		if i%(maxSessionsExamined/2) == 7 {
			want = append([]string{sid}, want...) // in progress; newest first
			continue
		}
		if err := s.apply(rec(), &SessionAbandoned{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
	e.p.mu.Unlock()
	defer func() {
		e.p.mu.Lock()
		e.p.state = replayTo(t, e.log, e.log.DurableSeq())
		e.p.mu.Unlock()
	}()
	var got []string
	q := ListQuery{Limit: 10}
	pages := 1
	for ; ; pages++ {
		if pages > 10 {
			t.Fatalf("more than 10 pages, got %v so far", got)
		}
		body, lastID, more, err := e.p.SessionsJSON(nil, pr.Account.ID, SessionFilter{AgentID: ag.ID, Status: "in_progress"}, q)
		if err != nil {
			t.Fatal(err)
		}
		var page struct{ Data []struct{ ID string } }
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Data {
			got = append(got, d.ID)
		}
		if !more {
			break
		}
		if lastID == "" {
			t.Fatalf("page %d: more remain but no place to start the next", pages)
		}
		q.StartingAfter = lastID
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	// 20,495 sessions not taken: the walk stopped twice at its budget.
	if pages != 3 {
		t.Errorf("%d pages, want 3: a page examines at most %d sessions it does not take", pages, maxSessionsExamined)
	}
}
