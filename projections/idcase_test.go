package projections

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"demosvc/eventlog"
)

// Ids are taken in either case (ParseID), and go into the log and the
// webhooks' data as the API shows them: a receiver matching a webhook's
// session_id against an answer's id must not miss one sent in upper case.
func TestIdsSentInUpperCaseReachTheLogAndWebhooksInLowerCase(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("A")
	ctx := context.Background()
	agent := strings.ToUpper(strings.TrimPrefix(e.agent(pr, "ag").ID, PrefixAgent))
	agent = PrefixAgent + agent

	v, err := e.p.StartSession(ctx, pr, SessionInput{AgentID: agent, Contact: &Contact{Name: "Up", Email: "up@example.com"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ses := fields(t, v)
	upSes := PrefixSession + strings.ToUpper(strings.TrimPrefix(ses.ID, PrefixSession))
	upContact := PrefixContact + strings.ToUpper(strings.TrimPrefix(ses.ContactID, PrefixContact))
	if _, err := e.p.StartSession(ctx, pr, SessionInput{AgentID: agent, ContactID: &upContact}, nil); err != nil {
		t.Fatal(err)
	}
	score := 90
	if _, err := e.p.ProgressSession(ctx, pr, upSes, Figures{IntentScore: &score}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.BookMeeting(ctx, pr, upSes, MeetingInput{ScheduledAt: "2026-12-01T10:00:00Z", CalendarLink: "https://cal.example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	name := "renamed"
	if _, err := e.p.UpdateAgent(ctx, pr, agent, AgentPatch{Name: &name}); err != nil {
		t.Fatal(err)
	}

	upper := regexp.MustCompile(`"(` + strings.Join([]string{PrefixAgent, PrefixSession, PrefixContact}, "|") + `)[0-9a-z]*[A-Z]`)
	sent := 0
	// checkWebhook counts the webhook a record is sent as, if any, and
	// checks that its data names ids in lower case.
	checkWebhook := func(rec *eventlog.Record, old string) {
		if name, data, ok := e.p.WebhookEvent(rec); ok {
			sent++
			b, _ := json.Marshal(data)
			if upper.Match(b) {
				t.Errorf("webhook %s of %srecord %d holds an id in upper case: %s", name, old, rec.Seq, b)
			}
		}
	}
	err = e.log.Read(1, e.log.DurableSeq(), func(rec *eventlog.Record) error {
		j, err := e.log.Registry().ToJSON(rec, false)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(j)
		if upper.Match(b) {
			t.Errorf("record %d (%s) holds an id in upper case: %s", rec.Seq, rec.Type, b)
		}
		checkWebhook(rec, "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent != 3 { // contact.created, lead.hot, meeting.booked
		t.Errorf("%d records are sent as webhooks, want 3", sent)
	}

	// A log written before ids were canonicalized holds some in upper
	// case, as the replay takes them: its webhooks name them in lower case.
	up := func(prefix string) string {
		return prefix + strings.ToUpper(strings.TrimPrefix(e.log.IDs().New(prefix), prefix))
	}
	con, ses2 := up(PrefixContact), up(PrefixSession)
	from := e.log.DurableSeq() + 1
	raw := []any{
		&ContactCreated{ContactID: con, Contact: Contact{Name: "Old", Email: "old@example.com"}, SessionID: ses2, AgentID: agent},
		&SessionStarted{SessionID: ses2, AgentID: agent, ContactID: con},
		&LeadHot{SessionID: ses2, IntentScore: 90, Threshold: 80},
		&MeetingBooked{SessionID: ses2, ScheduledAt: "2026-12-01T10:00:00Z", CalendarLink: "https://cal.example.com"},
	}
	events := make([]eventlog.Event, len(raw))
	for i, pl := range raw {
		events[i] = eventlog.Event{Account: pr.Account.ID, Actor: "key_test", Payload: pl}
	}
	dir := e.dir
	e.close()
	store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: NewRegistry(), IDs: eventlog.NewIDs(e.log.IDs().Now)})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := log.Begin()
	if err == nil {
		_, err = tx.Add(events)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	log.Close()
	store.Close()
	e = openEnv(t, dir, DefaultOptions) // replays the records above
	sent = 0
	err = e.log.Read(from, e.log.DurableSeq(), func(rec *eventlog.Record) error {
		checkWebhook(rec, "an old ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent != 3 {
		t.Errorf("%d old records are sent as webhooks, want 3", sent)
	}
}
