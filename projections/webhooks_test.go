package projections

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The address policy itself is tested in delivery/netguard; these check
// that registration and import apply it, as a 400 naming url.
func TestWebhookRegistrationRefusesHostsByTheAddressPolicy(t *testing.T) {
	for _, tc := range []struct {
		url          string
		allowPrivate bool
		msg          string
	}{
		{"http://127.1/x", true, "reads as a number"},
		{"http://0177.0.0.1/x", true, "reads as a number"},
		{"http://0x7f.0.0.1/x", true, "reads as a number"},
		{"http://2130706433/x", true, "reads as a number"},
		{"http://example.com./x", true, "must not end in a dot"},
		{"http://１２７.0.0.1/x", true, "must be ASCII"},
		{"http://[::FFFF:127.0.0.1]/x", true, "not in canonical form"},
		{"http://127.0.0.1:9/x", false, "the URL's host 127.0.0.1 is not a public address; deliveries there are refused (delivery.allow_private_networks)"},
		{"http://192.0.2.1/x", false, "not a public address"},
		{"http://[2001:db8::1]/x", false, "not a public address"},
		{"http://[::ffff:10.0.0.1]/x", false, "not a public address"},
		{"http://localhost:8080/x", false, "not a public address"},
	} {
		in := WebhookInput{URL: tc.url, Events: []string{"lead.hot"}}
		err := in.Validate(tc.allowPrivate)
		var e *Error
		if !errors.As(err, &e) || e.Code != EInvalid || e.Param != "url" || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s (allow_private_networks=%v): %v; want invalid_request on url saying %q", tc.url, tc.allowPrivate, err, tc.msg)
		}
	}
	for _, u := range []string{"https://hooks.example.com/x", "https://8.8.8.8/x", "https://[2606:4700:4700::1111]/x"} {
		in := WebhookInput{URL: u, Events: []string{"lead.hot"}}
		if err := in.Validate(false); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// A webhook keeps a list of events it had only if it judged a record of
// the account: a key switching lists back and forth with nothing between
// keeps none. A list sent in another order is answered in that order.
func TestAWebhookKeepsOnlyTheEarlierListsThatJudgedARecord(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("Acme")
	id := e.webhook(pr, "lead.hot")
	patch := func(events ...string) WebhookView {
		t.Helper()
		v, err := e.p.UpdateWebhook(t.Context(), pr, id, WebhookPatch{Events: events})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	earlier := func() []subscription {
		var out []subscription
		e.p.View(func(s *State) { out = s.webhooks[id].earlier })
		return out
	}
	for range 5 {
		patch("contact.created")
		patch("lead.hot")
	}
	if n := len(earlier()); n != 0 {
		t.Errorf("%d earlier lists kept after changes with no record between, want 0", n)
	}
	if got := patch("lead.hot", "demo.completed").Events; fmt.Sprint(got) != "[lead.hot demo.completed]" {
		t.Errorf("events %v", got)
	}
	if got := patch("demo.completed", "lead.hot").Events; fmt.Sprint(got) != "[demo.completed lead.hot]" {
		t.Errorf("the same events in another order: %v, want the order sent", got)
	}
	agent := e.agent(pr, "Ava") // a record the list in force judges
	var agentSeq uint64
	e.p.View(func(s *State) { agentSeq = s.seq })
	patch("contact.created")
	got := earlier()
	if len(got) != 1 || fmt.Sprint(got[0].events) != "[demo.completed lead.hot]" || got[0].until <= agentSeq {
		t.Fatalf("earlier lists %+v after a record (seq %d of agent %s) and a change, want the list before", got, agentSeq, agent.ID)
	}
	tg, ok := e.p.WebhookTarget(id)
	if !ok || !tg.Subscribed("lead.hot", agentSeq) || tg.Subscribed("contact.created", agentSeq) ||
		!tg.Subscribed("contact.created", got[0].until+1) || tg.Subscribed("lead.hot", got[0].until+1) {
		t.Errorf("the target judges seq %d by %v and later ones by %v", agentSeq, tg.earlier, tg.Events)
	}
}

// A receiver's 410 Gone that comes back while the webhook is paused by
// hand (an attempt in flight as it was paused) is recorded: the reason
// becomes gone, since when and the paused window stay the pause's. Any
// other reason, or gone again, records nothing.
func TestAGoneOnAPausedWebhookIsRecorded(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("Acme")
	id := e.webhook(pr, "lead.hot")
	disabled := "disabled"
	paused, err := e.p.UpdateWebhook(t.Context(), pr, id, WebhookPatch{Status: &disabled})
	if err != nil {
		t.Fatal(err)
	}
	var pausedSeq uint64
	e.p.View(func(s *State) { pausedSeq = s.webhooks[id].disabledSeq })
	head := e.log.DurableSeq()
	if err := e.p.DisableWebhook(t.Context(), id, DisabledFailing, "every attempt failed"); err != nil || e.log.DurableSeq() != head {
		t.Fatalf("failing on a paused webhook: %v, head %d → %d; want nothing recorded", err, head, e.log.DurableSeq())
	}
	if err := e.p.DisableWebhook(t.Context(), id, DisabledGone, "410"); err != nil {
		t.Fatal(err)
	}
	got, err := e.p.Webhook(pr.Account.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	e.p.View(func(s *State) { seq = s.webhooks[id].disabledSeq })
	if got.DisabledReason != DisabledGone || got.DisabledAt != paused.DisabledAt || seq != pausedSeq || e.log.DurableSeq() != head+1 {
		t.Errorf("after a 410 on the paused webhook: reason %q since %q window from %d, head %d; want gone since %q from %d, one record",
			got.DisabledReason, got.DisabledAt, seq, e.log.DurableSeq(), paused.DisabledAt, pausedSeq)
	}
	head = e.log.DurableSeq()
	if err := e.p.DisableWebhook(t.Context(), id, DisabledGone, "410"); err != nil || e.log.DurableSeq() != head {
		t.Errorf("gone again: %v, head %d → %d; want nothing recorded", err, head, e.log.DurableSeq())
	}
}
