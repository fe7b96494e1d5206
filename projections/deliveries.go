package projections

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"demosvc/eventlog"
)

// The webhook payloads of the seed (section 6), and DESIGN.md's for the two
// it leaves out.

// ContactRef is the contact as the demo.completed, demo.abandoned,
// lead.hot and contact.created payloads carry it.
type ContactRef struct {
	Name    string `json:"name"`
	Email   string `json:"email"`
	Company string `json:"company"`
}

// MeetingContact is the contact of a meeting.booked payload: no company.
type MeetingContact struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// DemoData is the data of demo.completed and demo.abandoned.
type DemoData struct {
	SessionID       string     `json:"session_id"`
	AgentID         string     `json:"agent_id"`
	Contact         ContactRef `json:"contact"`
	DurationSeconds int        `json:"duration_seconds"`
	IntentScore     int        `json:"intent_score"`
	MeetingBooked   bool       `json:"meeting_booked"`
	// ReplayURL is always set in demo.completed; in demo.abandoned it is
	// null when none was reported, as GET /v1/sessions/{id} shows it.
	ReplayURL *string `json:"replay_url"`
}

// LeadHotData is the data of lead.hot.
type LeadHotData struct {
	SessionID string     `json:"session_id"`
	AgentID   string     `json:"agent_id"`
	Contact   ContactRef `json:"contact"`
	Signals   Signals    `json:"signals"`
}

// MeetingData is the data of meeting.booked.
type MeetingData struct {
	SessionID string         `json:"session_id"`
	Contact   MeetingContact `json:"contact"`
	Meeting   struct {
		ScheduledAt  string `json:"scheduled_at"`
		CalendarLink string `json:"calendar_link"`
	} `json:"meeting"`
}

// ContactCreatedData is the data of contact.created.
type ContactCreatedData struct {
	ContactID string     `json:"contact_id"`
	Contact   ContactRef `json:"contact"`
	SessionID string     `json:"session_id"`
	AgentID   string     `json:"agent_id"`
}

// WebhookStatusData is the data of webhook.disabled (Reason and Detail
// set) and webhook.enabled (SkipBacklog): which webhook, and why.
type WebhookStatusData struct {
	WebhookID   string `json:"webhook_id"`
	Reason      string `json:"reason,omitempty"`
	Detail      string `json:"detail,omitempty"`
	SkipBacklog *bool  `json:"skip_backlog,omitempty"`
}

// WebhookTestData is the data of webhook.test.
type WebhookTestData struct {
	WebhookID string `json:"webhook_id"`
	Message   string `json:"message"`
}

// WebhookEvent returns the webhook event a record is sent as, and its
// data, or ok false for a record that is sent as none. Sessions, agents
// and contacts never leave the state, so the entities a record names are
// always found, and the data is what it was at the record, whenever it is
// built: figures of an ended session are final, the signals of lead.hot are
// kept from that moment, and meeting_booked counts only a meeting booked
// before the record.
func (p *Projections) WebhookEvent(rec *eventlog.Record) (name string, data any, ok bool) {
	switch rec.Type {
	case TypeSessionCompleted, TypeSessionAbandoned, TypeLeadHot, TypeMeetingBooked, TypeContactCreated:
	case TypeWebhookDisabled, TypeWebhookEnabled, TypeWebhookTestRequested:
		return webhookOpEvent(p.log.Registry(), rec)
	default:
		return "", nil, false // sent as no webhook event: no decoding, no lock
	}
	payload, err := p.log.Registry().Decode(rec)
	if err != nil {
		return "", nil, false
	}
	if pl, isContact := payload.(*ContactCreated); isContact {
		// Its data is all in the record: no read lock, which would wait
		// for the writer.
		// A log written before ids were canonicalized may hold them in
		// upper case: a receiver matches them against the API's.
		return "contact.created", ContactCreatedData{ContactID: canonicalID(PrefixContact, pl.ContactID),
			SessionID: canonicalID(PrefixSession, pl.SessionID), AgentID: canonicalID(PrefixAgent, pl.AgentID),
			Contact: ContactRef{Name: pl.Contact.Name, Email: pl.Contact.Email, Company: pl.Contact.Company}}, true
	}
	p.View(func(s *State) {
		ses := func(id string) *session {
			sid, _ := ParseID(PrefixSession, id)
			return s.sessions.at(sid)
		}
		ref := func(c *contact) ContactRef {
			return ContactRef{Name: s.text.str(c.name), Email: s.text.str(c.email), Company: s.text.str(c.company)}
		}
		// A session's figures are final once it ended; only a meeting can
		// come later, and its seq says whether it came before this event.
		demo := func(x *session) DemoData {
			m, replayURL := s.meetingOf(x), s.text.str(x.replayURL)
			return DemoData{SessionID: FormatID(PrefixSession, x.id), AgentID: FormatID(PrefixAgent, s.agentOf(x).id), Contact: ref(s.contactOf(x)),
				DurationSeconds: int(x.duration), IntentScore: int(x.score), MeetingBooked: m != nil && m.seq < rec.Seq,
				ReplayURL: &replayURL}
		}
		switch pl := payload.(type) {
		case *SessionCompleted:
			if x := ses(pl.SessionID); x != nil {
				d := demo(x)
				d.DurationSeconds, d.IntentScore, d.ReplayURL = pl.DurationSeconds, pl.IntentScore, &pl.ReplayURL
				name, data, ok = "demo.completed", d, true
			}
		case *SessionAbandoned:
			if x := ses(pl.SessionID); x != nil {
				d := demo(x)
				if d.ReplayURL != nil && *d.ReplayURL == "" {
					d.ReplayURL = nil // as the API shows it: null, not ""
				}
				name, data, ok = "demo.abandoned", d, true
			}
		case *LeadHot:
			if x := ses(pl.SessionID); x != nil {
				name, ok = "lead.hot", true
				data = LeadHotData{SessionID: FormatID(PrefixSession, x.id), AgentID: FormatID(PrefixAgent, s.agentOf(x).id), Contact: ref(s.contactOf(x)),
					Signals: Signals{Interest: int(x.hotSignals[0]), Objections: int(x.hotSignals[1]), BuyingSignals: int(x.hotSignals[2])}}
			}
		case *MeetingBooked:
			if x := ses(pl.SessionID); x != nil {
				c := s.contactOf(x)
				d := MeetingData{SessionID: FormatID(PrefixSession, x.id), Contact: MeetingContact{Name: s.text.str(c.name), Email: s.text.str(c.email)}}
				d.Meeting.ScheduledAt, d.Meeting.CalendarLink = pl.ScheduledAt, pl.CalendarLink
				name, data, ok = "meeting.booked", d, true
			}
		}
	})
	return name, data, ok
}

// Target is a webhook as the delivery side needs it, secret opened.
type Target struct {
	ID      string
	Account string
	URL     string
	Events  map[string]bool
	// earlier are the lists of events it had before Events, oldest first
	// (see Subscribed): the state's own slice, which is only appended to,
	// so that a target costs nothing more for a long history.
	earlier []subscription
	Secret  string
	// From is the seq of its registration: it receives events after it.
	From uint64
	// Disabled webhooks get nothing more, but keep their attempt log.
	Disabled bool
	// PreviousSecret, until PreviousUntil, signs beside Secret: the
	// overlap of a rotation.
	PreviousSecret string
	PreviousUntil  time.Time
	// RateLimit bounds the attempts started per second; 0: no limit.
	RateLimit int
	// skipped are the windows of records it is not sent (skip_backlog):
	// the state's own slice, as earlier.
	skipped []seqWindow
	// Version changes whenever any of the fields above may have: the
	// delivery side takes the new target then.
	Version uint64
}

// Subscribed reports whether t was subscribed to event name when the
// record at seq was appended: an event is sent by the list in force when
// it happened, whenever the delivery side reads it (a loop behind the log,
// or after a restart).
//
// A record in a window skipped by skip_backlog (recorded while the webhook
// was disabled, then enabled with it) is not sent either.
func (t *Target) Subscribed(name string, seq uint64) bool {
	for _, w := range t.skipped {
		if w.holds(seq) {
			return false
		}
	}
	i, _ := slices.BinarySearchFunc(t.earlier, seq, func(s subscription, seq uint64) int { return cmp.Compare(s.until, seq) })
	if i < len(t.earlier) {
		return slices.Contains(t.earlier[i].events, name)
	}
	return t.Events[name]
}

// Now returns t judging every event by the list of events it has now,
// whenever the event was recorded, skipped or not: what a replay, which
// names the records to send, selects by.
func (t Target) Now() Target {
	t.earlier, t.skipped = nil, nil
	return t
}

// Signing returns the secrets that sign a delivery at now: the current
// one, and the previous one while the overlap lasts.
func (t *Target) Signing(now time.Time) (current, previous string) {
	if t.PreviousSecret != "" && now.Before(t.PreviousUntil) {
		return t.Secret, t.PreviousSecret
	}
	return t.Secret, ""
}

// WebhooksChanged returns the seq of the last record that registered,
// changed or deleted a webhook, or 0 when none did since the state was
// loaded: while it stays the same, so do WebhookTargets.
func (p *Projections) WebhooksChanged() uint64 {
	p.rlock()
	defer p.mu.RUnlock()
	return p.state.webhookSeq
}

// WebhookTargets returns every registered webhook with its secret opened.
// A secret that does not open under the master key is left out, with the
// error.
func (p *Projections) WebhookTargets() ([]Target, []error) {
	var out []Target
	var errs []error
	p.View(func(s *State) {
		for _, acc := range s.accountOrder {
			for _, w := range s.tenants[acc.ID].webhooks {
				t, err := p.target(w)
				if err != nil {
					// Keep its delivery state; send it nothing.
					errs = append(errs, err)
				}
				out = append(out, t)
			}
		}
	})
	return out, errs
}

// target is w as the delivery side needs it; a webhook whose secret does
// not open is a disabled target, with the error.
func (p *Projections) target(w *webhook) (Target, error) {
	if w.disabled {
		return Target{ID: w.id, Account: w.tenant.account.ID, Disabled: true, Version: w.version}, nil
	}
	secret, err := p.opts.Sealer.Open(w.secret)
	if err != nil {
		return Target{ID: w.id, Account: w.tenant.account.ID, Disabled: true, Version: w.version}, fmt.Errorf("webhook %s: %w", w.id, err)
	}
	t := Target{ID: w.id, Account: w.tenant.account.ID, URL: w.url, Events: eventSet(w.events), earlier: w.earlier,
		Secret: string(secret), From: w.seq,
		skipped: w.skipped, RateLimit: w.rateLimit, Version: w.version}
	if w.prevUntil > 0 {
		// A previous secret that does not open only loses the overlap:
		// the current one signs.
		if prev, err := p.opts.Sealer.Open(w.prevSecret); err == nil {
			t.PreviousSecret, t.PreviousUntil = string(prev), time.Unix(w.prevUntil, 0)
		}
	}
	return t, nil
}

// WebhookVersion returns the version of webhook id (see Target.Version),
// and whether it is registered and enabled: a cheap check before each
// attempt of whether the target in hand is still the webhook's.
func (p *Projections) WebhookVersion(id string) (uint64, bool) {
	var v uint64
	var ok bool
	p.View(func(s *State) {
		if w := s.webhooks[id]; w != nil {
			v, ok = w.version, !w.disabled
		}
	})
	return v, ok
}

// WebhookExists reports whether a webhook is still registered and enabled:
// the last check before anything is sent to it.
func (p *Projections) WebhookExists(id string) bool {
	var ok bool
	p.View(func(s *State) { ok = s.webhooks[id] != nil && !s.webhooks[id].disabled })
	return ok
}

func eventSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, e := range names {
		set[e] = true
	}
	return set
}

// webhookOpEvent is WebhookEvent for the events of webhook operations:
// their data is in the record alone.
func webhookOpEvent(reg *eventlog.Registry, rec *eventlog.Record) (string, any, bool) {
	payload, err := reg.Decode(rec)
	if err != nil {
		return "", nil, false
	}
	switch pl := payload.(type) {
	case *WebhookDisabled:
		return "webhook.disabled", WebhookStatusData{WebhookID: pl.WebhookID, Reason: pl.Reason, Detail: pl.Detail}, true
	case *WebhookEnabled:
		skip := pl.SkipBacklog
		return "webhook.enabled", WebhookStatusData{WebhookID: pl.WebhookID, SkipBacklog: &skip}, true
	case *WebhookTestRequested:
		return "webhook.test", WebhookTestData{WebhookID: pl.WebhookID, Message: pl.Message}, true
	}
	return "", nil, false
}

// WebhookEventFor returns the webhook event a record is sent to webhook t
// as, and its data, or ok false when t is sent nothing for it: an event
// of a type t was subscribed to when it was recorded (Target.Subscribed),
// except webhook.disabled and webhook.enabled about t itself; and
// webhook.test only to the webhook it tests, subscribed or not.
func (p *Projections) WebhookEventFor(rec *eventlog.Record, t *Target) (name string, data any, ok bool) {
	name, data, ok = p.WebhookEvent(rec)
	if !ok {
		return "", nil, false
	}
	switch d := data.(type) {
	case WebhookTestData:
		return name, data, d.WebhookID == t.ID
	case WebhookStatusData:
		if d.WebhookID == t.ID {
			return "", nil, false
		}
	}
	return name, data, t.Subscribed(name, rec.Seq)
}

// Redelivery returns the redelivery request a record holds for webhook
// wh, if it is one.
func (p *Projections) Redelivery(rec *eventlog.Record, wh string) (*WebhookRedeliveryRequested, bool) {
	if rec.Type != TypeWebhookRedeliveryRequested {
		return nil, false
	}
	payload, err := p.log.Registry().Decode(rec)
	if err != nil {
		return nil, false
	}
	r, ok := payload.(*WebhookRedeliveryRequested)
	return r, ok && r.WebhookID == wh
}

// ChangesEvents reports whether a record changes the events webhook wh is
// subscribed to.
func (p *Projections) ChangesEvents(rec *eventlog.Record, wh string) bool {
	if rec.Type != TypeWebhookUpdated {
		return false
	}
	payload, err := p.log.Registry().Decode(rec)
	if err != nil {
		return false
	}
	u, ok := payload.(*WebhookUpdated)
	return ok && u.WebhookID == wh && u.Events != nil
}

// TestRequest returns the test request a record holds, if it is one.
func (p *Projections) TestRequest(rec *eventlog.Record) (*WebhookTestRequested, bool) {
	if rec.Type != TypeWebhookTestRequested {
		return nil, false
	}
	payload, err := p.log.Registry().Decode(rec)
	if err != nil {
		return nil, false
	}
	r, ok := payload.(*WebhookTestRequested)
	return r, ok
}

// WebhookTarget returns webhook id as the delivery side needs it, or ok
// false if it is not registered or its secret does not open.
func (p *Projections) WebhookTarget(id string) (Target, bool) {
	var t Target
	var err error
	found := false
	p.View(func(s *State) {
		if w := s.webhooks[id]; w != nil {
			t, err = p.target(w)
			found = true
		}
	})
	return t, found && err == nil
}
