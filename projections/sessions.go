package projections

import (
	"context"

	"demosvc/eventlog"
)

// SessionInput is the body of POST /v1/sessions: an agent and either a
// contact to capture or an existing contact's id.
type SessionInput struct {
	AgentID   string   `json:"agent_id"`
	Contact   *Contact `json:"contact"`
	ContactID *string  `json:"contact_id"`
}

// Figures are the reported numbers of a session; nil ones are not sent.
type Figures struct {
	IntentScore     *int     `json:"intent_score"`
	Signals         *Signals `json:"signals"`
	DurationSeconds *int     `json:"duration_seconds"`
	ReplayURL       *string  `json:"replay_url"`
}

// MeetingInput is the body of POST /v1/sessions/{id}/meeting.
type MeetingInput struct {
	ScheduledAt  string `json:"scheduled_at"`
	CalendarLink string `json:"calendar_link"`
}

func (f *Figures) validate() error {
	if err := checkRange("intent_score", f.IntentScore, maxScore); err != nil {
		return err
	}
	if err := checkSignals("signals", f.Signals); err != nil {
		return err
	}
	if err := checkRange("duration_seconds", f.DurationSeconds, maxDuration); err != nil {
		return err
	}
	if f.ReplayURL != nil {
		return checkURL("replay_url", *f.ReplayURL)
	}
	return nil
}

// Validate checks the fields of a new session.
func (in *SessionInput) Validate() error {
	if in.AgentID == "" {
		return ParamErrorf(EInvalid, "agent_id", "is required")
	}
	if _, ok := ParseID(PrefixAgent, in.AgentID); !ok {
		return ParamErrorf(EInvalid, "agent_id", "must be an agent id (agt_…)")
	}
	switch {
	case in.Contact != nil && in.ContactID != nil:
		return ParamErrorf(EInvalid, "contact", "send either contact or contact_id, not both")
	case in.Contact == nil && in.ContactID == nil:
		return ParamErrorf(EInvalid, "contact", "send contact {name, email, company} or contact_id")
	case in.ContactID != nil:
		if _, ok := ParseID(PrefixContact, *in.ContactID); !ok {
			return ParamErrorf(EInvalid, "contact_id", "must be a contact id (cnt_…)")
		}
		return nil
	}
	c := in.Contact
	if err := checkText("contact.name", c.Name, 1, maxNameChars); err != nil {
		return err
	}
	if err := checkEmail("contact.email", c.Email); err != nil {
		return err
	}
	return checkOptionalText("contact.company", c.Company, maxNameChars)
}

// StartSession starts a session in_progress for an agent, capturing the
// contact when its e-mail is new to the account.
func (p *Projections) StartSession(ctx context.Context, pr Principal, in SessionInput, idem *Idempotency) (any, error) {
	if in.Contact != nil {
		c := *in.Contact
		c.Name, c.Company = TrimText(c.Name), TrimText(c.Company)
		in.Contact = &c
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	// Ids go into the events as the API shows them: an id sent in upper
	// case (ParseID takes either) would reach the log and the webhooks so.
	in.AgentID = canonicalID(PrefixAgent, in.AgentID)
	if in.ContactID != nil {
		c := canonicalID(PrefixContact, *in.ContactID)
		in.ContactID = &c
	}
	sid := p.log.IDs().New(PrefixSession)
	id, _ := ParseID(PrefixSession, sid)
	account := pr.Account.ID // the closures take the id, not the whole Principal
	return p.Do(ctx, Command{
		Account: account, Actor: pr.KeyID, Idem: idem,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			a, ok := agentKind.in(s, account, in.AgentID)
			if !ok {
				return nil, nil, ParamErrorf(ENotFound, "agent_id", "no agent %q", in.AgentID)
			}
			if !a.active {
				return nil, nil, ParamErrorf(EAgentInactive, "agent_id", "agent %s is inactive; activate it to start sessions", in.AgentID)
			}
			var events []any
			var contactID string
			if in.ContactID != nil {
				if _, ok := contactKind.in(s, account, *in.ContactID); !ok {
					return nil, nil, ParamErrorf(ENotFound, "contact_id", "no contact %q", *in.ContactID)
				}
				contactID = *in.ContactID
			} else if c := a.tenant.emails.get(s, emailKey(in.Contact.Email)); c != nil {
				contactID = FormatID(PrefixContact, c.id)
			} else {
				// The id is made only here: a session with a contact the
				// account has needs none.
				contactID = p.log.IDs().New(PrefixContact)
				events = append(events, &ContactCreated{ContactID: contactID, Contact: *in.Contact, SessionID: sid, AgentID: in.AgentID})
			}
			events = append(events, &SessionStarted{SessionID: sid, AgentID: in.AgentID, ContactID: contactID})
			return events, nil, nil
		},
		Result: func(s *State) any { return s.answer(s.sessions.at(id)) },
	})
}

// sessionCommand runs a command on one session of the caller's account.
func (p *Projections) sessionCommand(ctx context.Context, pr Principal, sessionID string, idem *Idempotency,
	decide func(s *State, ses *session) ([]any, error)) (any, error) {
	id, ok := ParseID(PrefixSession, sessionID)
	if !ok {
		return nil, notFound("session", sessionID)
	}
	account := pr.Account.ID
	return p.Do(ctx, Command{
		Account: account, Actor: pr.KeyID, Idem: idem,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			ses, ok := sessionKind.in(s, account, sessionID)
			if !ok {
				return nil, nil, notFound("session", sessionID)
			}
			events, err := decide(s, ses)
			return events, nil, err
		},
		Result: func(s *State) any { return s.answer(s.sessions.at(id)) },
	})
}

func requireInProgress(ses *session, action string) error {
	if ses.status != inProgress {
		return Errorf(EInvalidState, "session %s is %s; only a session in_progress can be %s",
			FormatID(PrefixSession, ses.id), ses.status, action)
	}
	return nil
}

// hotEvent returns the lead.hot event when score first reaches threshold.
func hotEvent(ses *session, score *int, threshold int) []any {
	if ses.hot || score == nil || *score < threshold {
		return nil
	}
	return []any{&LeadHot{SessionID: FormatID(PrefixSession, ses.id), IntentScore: *score, Threshold: threshold}}
}

// ProgressSession reports live figures of a session in_progress.
func (p *Projections) ProgressSession(ctx context.Context, pr Principal, sessionID string, f Figures, idem *Idempotency) (any, error) {
	if f.ReplayURL != nil {
		return nil, ParamErrorf(EInvalid, "replay_url", "unknown field \"replay_url\"; a replay URL is given when the session ends")
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return p.sessionCommand(ctx, pr, sessionID, idem, func(s *State, ses *session) ([]any, error) {
		if err := requireInProgress(ses, "progressed"); err != nil {
			return nil, err
		}
		if f == (Figures{}) {
			return nil, nil
		}
		events := []any{&SessionProgressed{SessionID: canonicalID(PrefixSession, sessionID), IntentScore: f.IntentScore, Signals: f.Signals, DurationSeconds: f.DurationSeconds}}
		return append(events, hotEvent(ses, f.IntentScore, p.opts.HotThreshold)...), nil
	})
}

// CompleteSession ends a session in_progress as completed. Every figure is
// required.
func (p *Projections) CompleteSession(ctx context.Context, pr Principal, sessionID string, f Figures, idem *Idempotency) (any, error) {
	for _, req := range []struct {
		name string
		set  bool
	}{{"intent_score", f.IntentScore != nil}, {"signals", f.Signals != nil}, {"duration_seconds", f.DurationSeconds != nil}, {"replay_url", f.ReplayURL != nil}} {
		if !req.set {
			return nil, ParamErrorf(EInvalid, req.name, "is required to complete a session")
		}
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return p.sessionCommand(ctx, pr, sessionID, idem, func(s *State, ses *session) ([]any, error) {
		if err := requireInProgress(ses, "completed"); err != nil {
			return nil, err
		}
		events := []any{&SessionCompleted{SessionID: canonicalID(PrefixSession, sessionID), IntentScore: *f.IntentScore, Signals: *f.Signals,
			DurationSeconds: *f.DurationSeconds, ReplayURL: *f.ReplayURL}}
		return append(events, hotEvent(ses, f.IntentScore, p.opts.HotThreshold)...), nil
	})
}

// AbandonSession ends a session in_progress as abandoned; figures are
// optional.
func (p *Projections) AbandonSession(ctx context.Context, pr Principal, sessionID string, f Figures, idem *Idempotency) (any, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	return p.sessionCommand(ctx, pr, sessionID, idem, func(s *State, ses *session) ([]any, error) {
		if err := requireInProgress(ses, "abandoned"); err != nil {
			return nil, err
		}
		return []any{&SessionAbandoned{SessionID: canonicalID(PrefixSession, sessionID), IntentScore: f.IntentScore, Signals: f.Signals,
			DurationSeconds: f.DurationSeconds, ReplayURL: f.ReplayURL}}, nil
	})
}

// BookMeeting books the follow-up meeting of a session in_progress or
// completed, once.
func (p *Projections) BookMeeting(ctx context.Context, pr Principal, sessionID string, in MeetingInput, idem *Idempotency) (any, error) {
	if in.ScheduledAt == "" {
		return nil, ParamErrorf(EInvalid, "scheduled_at", "is required")
	}
	at, err := checkTime("scheduled_at", in.ScheduledAt)
	if err != nil {
		return nil, err
	}
	if err := checkURL("calendar_link", in.CalendarLink); err != nil {
		return nil, err
	}
	return p.sessionCommand(ctx, pr, sessionID, idem, func(s *State, ses *session) ([]any, error) {
		if ses.meeting != 0 {
			return nil, Errorf(EInvalidState, "session %s already has a meeting booked", sessionID)
		}
		if ses.status == abandoned {
			return nil, Errorf(EInvalidState, "session %s is abandoned; a meeting can be booked on a session in_progress or completed", sessionID)
		}
		return []any{&MeetingBooked{SessionID: canonicalID(PrefixSession, sessionID), ScheduledAt: at, CalendarLink: in.CalendarLink}}, nil
	})
}

// SessionFilter narrows a session list.
type SessionFilter struct {
	AgentID, ContactID, Status string
}

// SessionsJSON lists the sessions of account, most recent first (by the
// order they started), through the smallest index that fits the filter. It
// returns {"data":[…]} written straight from the state, the id of the last
// session on the page (for the next page's cursor) and whether more remain.
// The body is appended to dst, which the caller may reuse for the next.
func (p *Projections) SessionsJSON(dst []byte, account string, f SessionFilter, q ListQuery) (body []byte, lastID string, more bool, err error) {
	body = append(dst, `{"data":[`...)
	var last, examined *session
	err = p.eachSession(account, f, q, func(s *State, ses *session) {
		if last != nil {
			body = append(body, ',')
		}
		body = s.appendSession(body, ses)
		last = ses
	}, &more, &examined)
	switch {
	case examined != nil:
		lastID = FormatID(PrefixSession, examined.id) // the walk's budget ran out there
	case last != nil:
		lastID = FormatID(PrefixSession, last.id)
	}
	return append(body, "]}"...), lastID, more, err
}

// maxSessionsExamined bounds the sessions one page of a list with two
// filters examines without taking them (an agent's sessions of another
// status, or a contact's of another agent): the walk holds the state's
// read lock, which a write waits for. Past it the page ends with what it
// found (possibly nothing), more remain, and the next page starts after
// the last session examined. About 0.2 ms; the single-filter lists walk an
// index that holds only what they take.
const maxSessionsExamined = 10_000

// SessionJSON appends one session of account to dst as JSON, written
// straight from the state.
func (p *Projections) SessionJSON(dst []byte, account, sessionID string) ([]byte, error) {
	return oneIn(p, sessionKind, account, sessionID, func(s *State, ses *session) []byte { return s.appendSession(dst, ses) })
}

// eachSession calls emit, with the state read-locked, for each session of
// the page the filter and query select; more says whether any remain. A
// walk that examined maxSessionsExamined sessions it did not take stops
// there, sets more and *examined to the last it examined.
func (p *Projections) eachSession(account string, f SessionFilter, q ListQuery, emit func(*State, *session), more *bool, examined **session) error {
	var status sessionStatus
	if f.Status != "" {
		var ok bool
		if status, ok = parseStatus(f.Status); !ok {
			return ParamErrorf(EInvalid, "status", "must be in_progress, completed or abandoned, got %q", f.Status)
		}
	}
	return listing(p, sessionKind, account, q, func(s *State, t *tenant, after uint64) {
		var agentF *agent
		var contactF *contact
		var ok bool
		if f.AgentID != "" {
			if agentF, ok = agentKind.in(s, account, f.AgentID); !ok {
				return // no such agent in the account: an empty list
			}
		}
		if f.ContactID != "" {
			if contactF, ok = contactKind.in(s, account, f.ContactID); !ok {
				return
			}
		}
		take := taking(q.Limit, nil, func(ses *session) { emit(s, ses) }, more)
		skipped := 0
		visit := func(ses *session) bool {
			if (agentF == nil || ses.agent == agentF.num) && (contactF == nil || ses.contact == contactF.num) &&
				(f.Status == "" || ses.status == status) {
				return take(ses)
			}
			if skipped++; skipped == maxSessionsExamined {
				*more, *examined = true, ses
				return false
			}
			return true
		}
		switch {
		case contactF != nil:
			descend(s.sessionsOfContact(contactF), after, visit)
		case agentF != nil:
			descend(s.sessionsIn(&agentF.sessions), after, visit)
		case f.Status != "":
			tree := t.byStatus[status]
			if after == 0 {
				tree.Descend(s.sessionsOf(visit))
			} else {
				tree.DescendLessOrEqual(sesRef{seq: after - 1}, s.sessionsOf(visit))
			}
		default:
			descend(s.sessionsIn(&t.sessions), after, visit)
		}
	})
}

// Contact returns one contact of account.
func (p *Projections) Contact(account, contactID string) (ContactView, error) {
	return oneIn(p, contactKind, account, contactID, (*State).contactView)
}

// Contacts lists the contacts of account, most recent first; with email
// not "", only the one whose e-mail is that one, case-insensitively (the
// rule that makes a contact new to an account).
func (p *Projections) Contacts(account string, q ListQuery, email string) (Page[ContactView], error) {
	if email == "" {
		return pageIn(p, contactKind, account, q, nil, (*State).contactView)
	}
	// At most one contact has the address: the account's e-mail index
	// finds it without a walk.
	pg := Page[ContactView]{Data: []ContactView{}}
	err := listing(p, contactKind, account, q, func(s *State, t *tenant, after uint64) {
		if c := t.emails.get(s, emailKey(email)); c != nil && (after == 0 || c.seq < after) {
			pg.Data = append(pg.Data, s.contactView(c))
		}
	})
	return pg, err
}
