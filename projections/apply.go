package projections

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"demosvc/eventlog"
)

// apply advances the state by one record. payload is the record's payload
// decoded at its latest version (a pointer). An error means the log holds
// an event the state cannot take: replay stops there. Before it changes an
// agent or a session it calls keepAgent or keepSession, for a snapshot in
// progress (snapshot_cut.go).
func (s *State) apply(rec *eventlog.Record, payload any) error {
	if rec.Seq != s.seq+1 {
		return fmt.Errorf("seq %d applied after %d", rec.Seq, s.seq)
	}
	var err error
	switch p := payload.(type) {
	case *AccountCreated:
		err = s.applyAccountCreated(rec, p)
	case *APIKeyCreated:
		err = s.applyKeyCreated(rec, p)
	case *APIKeyRevoked:
		err = s.applyKeyRevoked(rec, p)
	case *AgentCreated:
		err = s.applyAgentCreated(rec, p)
	case *AgentUpdated:
		err = s.applyAgentUpdated(rec, p)
	case *ContactCreated:
		err = s.applyContactCreated(rec, p)
	case *SessionStarted:
		err = s.applySessionStarted(rec, p)
	case *SessionProgressed:
		err = s.applySessionProgressed(rec, p)
	case *LeadHot:
		err = s.applyLeadHot(rec, p)
	case *SessionCompleted:
		err = s.applySessionCompleted(rec, p)
	case *SessionAbandoned:
		err = s.applySessionAbandoned(rec, p)
	case *MeetingBooked:
		err = s.applyMeetingBooked(rec, p)
	case *WebhookRegistered:
		err = s.applyWebhookRegistered(rec, p)
	case *WebhookDeleted:
		err = s.applyWebhookDeleted(rec, p)
	case *WebhookDisabled:
		err = s.applyWebhookDisabled(rec, p)
	case *WebhookUpdated:
		err = s.applyWebhookUpdated(rec, p)
	case *WebhookEnabled:
		err = s.applyWebhookEnabled(rec, p)
	case *WebhookSecretRotated:
		err = s.applyWebhookSecretRotated(rec, p)
	case *WebhookTestRequested:
		err = s.applyWebhookRequest(rec, p.WebhookID)
	case *WebhookRedeliveryRequested:
		err = s.applyWebhookRequest(rec, p.WebhookID)
	case *UserCreated:
		err = s.applyUserCreated(rec, p)
	case *UserSetupIssued:
		err = s.applyUserSetupIssued(rec, p)
	case *UserPasswordSet:
		err = s.applyUserPasswordSet(rec, p)
	case *UserSignedIn:
		err = s.applyUserSignedIn(rec, p)
	case *UserSignedOut:
		err = s.applyUserSignedOut(rec, p)
	case *UserDisabled:
		err = s.applyUserDisabled(rec, p)
	default:
		err = errorf("no projection for %T", payload)
	}
	if err != nil {
		return fmt.Errorf("seq %d (%s): %w", rec.Seq, rec.Type, err)
	}
	if t := s.tenants[rec.Account]; t != nil {
		t.events.add(rec.Seq)
	}
	s.seq = rec.Seq
	return nil
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

var errWrongAccount = errors.New("belongs to another account")

func (s *State) tenantOf(rec *eventlog.Record) (*tenant, error) {
	t := s.tenants[rec.Account]
	if t == nil {
		return nil, errorf("unknown account %q", rec.Account)
	}
	return t, nil
}

func (s *State) applyAccountCreated(rec *eventlog.Record, p *AccountCreated) error {
	if p.AccountID != rec.Account {
		return fmt.Errorf("account_id %q differs from the record's account %q", p.AccountID, rec.Account)
	}
	if s.accounts[p.AccountID] != nil {
		return fmt.Errorf("account %s exists", p.AccountID)
	}
	a := &Account{ID: p.AccountID, Name: p.Name, Plan: p.Plan, RateLimitPerMinute: p.RateLimitPerMinute, CreatedAt: Timestamp(rec.Time)}
	s.accounts[a.ID] = a
	s.accountOrder = append(s.accountOrder, a)
	s.addTenant(a)
	s.authGen++
	return nil
}

func (s *State) applyKeyCreated(rec *eventlog.Record, p *APIKeyCreated) error {
	if s.accounts[rec.Account] == nil {
		return fmt.Errorf("key %s for unknown account %q", p.KeyID, rec.Account)
	}
	if s.keys[p.KeyID] != nil {
		return fmt.Errorf("key %s exists", p.KeyID)
	}
	var h [sha256.Size]byte
	if b, err := hex.DecodeString(p.KeyHash); err != nil || len(b) != len(h) {
		return fmt.Errorf("key %s: key_hash is not a hex SHA-256", p.KeyID)
	} else {
		copy(h[:], b)
	}
	k := &APIKey{ID: p.KeyID, AccountID: rec.Account, Hash: h, Last4: p.Last4, CreatedAt: Timestamp(rec.Time), CreatedBy: rec.Actor}
	s.keys[k.ID] = k
	s.keysByHash[h] = k
	s.keyOrder = append(s.keyOrder, k)
	s.authGen++
	return nil
}

func (s *State) applyKeyRevoked(rec *eventlog.Record, p *APIKeyRevoked) error {
	k := s.keys[p.KeyID]
	if k == nil || k.AccountID != rec.Account {
		return fmt.Errorf("revoking unknown key %s", p.KeyID)
	}
	// A cut in progress holds a copy of every key: no pre-image to keep.
	if k.RevokedAt == nil {
		t := Timestamp(rec.Time)
		k.RevokedAt = &t
		s.authGen++
	}
	return nil
}

func (s *State) applyAgentCreated(rec *eventlog.Record, p *AgentCreated) error {
	t, err := s.tenantOf(rec)
	if err != nil {
		return err
	}
	id, err := agentKind.fresh(s, p.AgentID)
	if err != nil {
		return err
	}
	now := unix(rec.Time)
	a := &agent{id: id, tenant: t, seq: rec.Seq, name: p.Name, sandboxURL: p.SandboxURL, persona: p.Persona,
		active: p.Status != AgentInactive, createdAt: now, updatedAt: now}
	s.addAgent(a)
	t.agents = append(t.agents, a)
	t.stats.agentActive(false, a.active)
	return nil
}

func (s *State) applyAgentUpdated(rec *eventlog.Record, p *AgentUpdated) error {
	a, err := agentKind.of(s, rec, p.AgentID)
	if err != nil {
		return err
	}
	s.keepAgent(a)
	if p.Name != nil {
		a.name = *p.Name
	}
	if p.SandboxURL != nil {
		a.sandboxURL = *p.SandboxURL
	}
	if p.Persona != nil {
		a.persona = *p.Persona
	}
	if p.Status != nil {
		was := a.active
		a.active = *p.Status != AgentInactive
		a.tenant.stats.agentActive(was, a.active)
	}
	// Every change shows a later updated_at, as the seed says it changes:
	// timestamps are whole seconds, so a change within the second of the
	// one before takes the next second, up to maxUpdatedAtLead ahead of
	// the change's time: a steady burst of changes must not carry it
	// minutes into the future.
	t := unix(rec.Time)
	a.updatedAt = max(t, min(a.updatedAt+1, t+maxUpdatedAtLead))
	return nil
}

// maxUpdatedAtLead is how many seconds an agent's updated_at may run ahead
// of the time of the change it shows, so that each of a burst of changes
// within a second or two shows a later one.
const maxUpdatedAtLead = 5

func (s *State) applyContactCreated(rec *eventlog.Record, p *ContactCreated) error {
	t, err := s.tenantOf(rec)
	if err != nil {
		return err
	}
	id, err := contactKind.fresh(s, p.ContactID)
	if err != nil {
		return err
	}
	key := emailKey(p.Contact.Email)
	if t.emails.get(s, key) != nil {
		return errorf("contact e-mail %q exists in the account", p.Contact.Email)
	}
	c, n := s.contacts.addNumbered(id, contact{id: id, tenant: t.num, seq: rec.Seq, name: s.text.keep(p.Contact.Name),
		email: s.text.keep(p.Contact.Email), company: s.text.keep(p.Contact.Company), createdAt: unix(rec.Time)})
	c.num = n
	t.contacts.add(n)
	t.emails.add(s, key, n)
	return nil
}

func (s *State) applySessionStarted(rec *eventlog.Record, p *SessionStarted) error {
	a, err := agentKind.of(s, rec, p.AgentID)
	if err != nil {
		return err
	}
	c, err := contactKind.of(s, rec, p.ContactID)
	if err != nil {
		return err
	}
	id, err := sessionKind.fresh(s, p.SessionID)
	if err != nil {
		return err
	}
	ses, n := s.sessions.addNumbered(id, session{id: id, agent: a.num, contact: c.num, seq: rec.Seq, startedAt: unix(rec.Time), status: inProgress})
	ses.num = n
	t := a.tenant
	t.sessions.add(n)
	a.sessions.add(n)
	s.addContactSession(c, ses)
	t.byStatus[inProgress].ReplaceOrInsert(sesRef{ses.seq, n})
	t.stats.sessionStarted(ses.startedAt)
	return nil
}

// setFigures applies reported figures; nil ones stay as they are.
func (ses *session) setFigures(score *int, sig *Signals, duration *int) {
	if score != nil {
		ses.score = uint8(*score)
	}
	if sig != nil {
		ses.signals = [3]uint8{uint8(sig.Interest), uint8(sig.Objections), uint8(sig.BuyingSignals)}
	}
	if duration != nil {
		ses.duration = int32(*duration)
	}
}

func (s *State) applySessionProgressed(rec *eventlog.Record, p *SessionProgressed) error {
	ses, err := sessionKind.of(s, rec, p.SessionID)
	if err != nil {
		return err
	}
	if ses.status != inProgress {
		return errorf("session %s is %s", p.SessionID, ses.status)
	}
	s.keepSession(ses)
	ses.setFigures(p.IntentScore, p.Signals, p.DurationSeconds)
	s.addEvent(ses, rec.Seq)
	return nil
}

func (s *State) applyLeadHot(rec *eventlog.Record, p *LeadHot) error {
	ses, err := sessionKind.of(s, rec, p.SessionID)
	if err != nil {
		return err
	}
	s.keepSession(ses)
	t := s.tenantOfSession(ses)
	if !ses.hot {
		t.hot.ReplaceOrInsert(s.ref(ses))
	}
	ses.hot = true
	ses.hotSignals = ses.signals
	s.addEvent(ses, rec.Seq)
	t.stats.leadHot(unix(rec.Time))
	return nil
}

// end moves a session out of in_progress.
func (s *State) end(ses *session, to sessionStatus, at int64) {
	t := s.tenantOfSession(ses)
	ref := s.ref(ses)
	t.byStatus[ses.status].Delete(ref)
	ses.status = to
	ses.endedAt = at
	t.byStatus[to].ReplaceOrInsert(ref)
	t.stats.sessionEnded(to, ses.score, at)
}

func (s *State) applySessionCompleted(rec *eventlog.Record, p *SessionCompleted) error {
	ses, err := sessionKind.of(s, rec, p.SessionID)
	if err != nil {
		return err
	}
	if ses.status != inProgress {
		return errorf("session %s is %s", p.SessionID, ses.status)
	}
	s.keepSession(ses)
	ses.setFigures(&p.IntentScore, &p.Signals, &p.DurationSeconds)
	ses.replayURL = s.text.keep(p.ReplayURL)
	s.addEvent(ses, rec.Seq)
	s.end(ses, completed, unix(rec.Time))
	return nil
}

func (s *State) applySessionAbandoned(rec *eventlog.Record, p *SessionAbandoned) error {
	ses, err := sessionKind.of(s, rec, p.SessionID)
	if err != nil {
		return err
	}
	if ses.status != inProgress {
		return errorf("session %s is %s", p.SessionID, ses.status)
	}
	s.keepSession(ses)
	ses.setFigures(p.IntentScore, p.Signals, p.DurationSeconds)
	if p.ReplayURL != nil {
		ses.replayURL = s.text.keep(*p.ReplayURL)
	}
	s.addEvent(ses, rec.Seq)
	s.end(ses, abandoned, unix(rec.Time))
	return nil
}

func (s *State) applyMeetingBooked(rec *eventlog.Record, p *MeetingBooked) error {
	ses, err := sessionKind.of(s, rec, p.SessionID)
	if err != nil {
		return err
	}
	if ses.meeting != 0 {
		return errorf("session %s has a meeting", p.SessionID)
	}
	s.keepSession(ses)
	s.addMeeting(ses, meeting{scheduledAt: s.text.keep(p.ScheduledAt), calendarLink: s.text.keep(p.CalendarLink), seq: rec.Seq})
	s.addEvent(ses, rec.Seq)
	a := s.agentOf(ses)
	a.tenant.stats.meetingBooked(a, unix(rec.Time))
	return nil
}

func (s *State) applyWebhookRegistered(rec *eventlog.Record, p *WebhookRegistered) error {
	t, err := s.tenantOf(rec)
	if err != nil {
		return err
	}
	if _, err := webhookKind.fresh(s, p.WebhookID); err != nil {
		return err
	}
	w := &webhook{id: p.WebhookID, tenant: t, seq: rec.Seq, url: p.URL, events: append([]string(nil), p.Events...),
		secret: p.Secret, createdAt: unix(rec.Time), version: rec.Seq, eventsSince: rec.Seq}
	s.webhooks[w.id] = w
	t.webhooks = append(t.webhooks, w)
	s.webhookSeq = rec.Seq
	return nil
}

func (s *State) applyWebhookDeleted(rec *eventlog.Record, p *WebhookDeleted) error {
	w, err := webhookKind.of(s, rec, p.WebhookID)
	if err != nil {
		return err
	}
	// A cut in progress holds copies, and the list is replaced, not
	// changed in place.
	delete(s.webhooks, w.id)
	t := w.tenant
	i := indexBySeq(&t.webhooks, w.seq)
	t.webhooks = append(t.webhooks[:i:i], t.webhooks[i+1:]...)
	s.webhookSeq = rec.Seq
	return nil
}
