package projections

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"demosvc/eventlog"
)

// Validate methods check an event payload's values with the rules the
// commands apply, so that an imported log holds only what the service
// itself could have written.

// Checker returns a function that applies each record it is given to s,
// after checking its payload's values: what `log import` uses to refuse a
// record the service could not have written. allowPrivate is
// delivery.allow_private_networks: a webhook URL is held to the rules the
// API applies at registration under the same setting.
func (s *State) Checker(reg *eventlog.Registry, allowPrivate bool) func(rec *eventlog.Record) error {
	return func(rec *eventlog.Record) error {
		payload, err := reg.Decode(rec)
		if err != nil {
			return err
		}
		// Every registered payload type is a Validator: the registry
		// refuses one that is not.
		if err := payload.(eventlog.Validator).Validate(); err != nil {
			return fmt.Errorf("%s: %w", rec.Type, err)
		}
		if w, ok := payload.(*WebhookRegistered); ok {
			in := WebhookInput{URL: w.URL, Events: w.Events}
			if err := in.Validate(allowPrivate); err != nil {
				return fmt.Errorf("%s: %w", rec.Type, err)
			}
		}
		if w, ok := payload.(*WebhookUpdated); ok && w.URL != nil {
			if err := checkWebhookURL(*w.URL, allowPrivate); err != nil {
				return fmt.Errorf("%s: %w", rec.Type, err)
			}
		}
		if err := s.checkCommandRules(rec, payload); err != nil {
			return fmt.Errorf("%s: %w", rec.Type, err)
		}
		return s.apply(rec, payload)
	}
}

// checkCommandRules holds an imported record to the rules its command
// checks against the state, which replay does not (a log the service wrote
// meets them, and a replay must open every log it wrote): what a line of
// an import could otherwise make that no request can.
func (s *State) checkCommandRules(rec *eventlog.Record, payload any) error {
	switch p := payload.(type) {
	case *ContactCreated:
		// Made with its session's start, by one of the account's agents.
		if _, err := agentKind.of(s, rec, p.AgentID); err != nil {
			return ParamErrorf(EInvalid, "agent_id", "%v", err)
		}
		if _, err := sessionKind.fresh(s, p.SessionID); p.SessionID != "" && err != nil {
			return ParamErrorf(EInvalid, "session_id", "must be the id of the session started with the contact: %v", err)
		}
	case *SessionStarted:
		if a, err := agentKind.of(s, rec, p.AgentID); err == nil && !a.active {
			return ParamErrorf(EAgentInactive, "agent_id", "agent %s is inactive", p.AgentID)
		}
	case *LeadHot:
		ses, err := sessionKind.of(s, rec, p.SessionID)
		if err != nil {
			return nil // apply names it
		}
		switch {
		case ses.hot:
			return ParamErrorf(EInvalidState, "session_id", "session %s has turned hot already", p.SessionID)
		case ses.status == abandoned:
			return ParamErrorf(EInvalidState, "session_id", "session %s is abandoned; an abandoned lead does not turn hot", p.SessionID)
		case p.IntentScore < p.Threshold || p.IntentScore != int(ses.score):
			return ParamErrorf(EInvalid, "intent_score", "must be the session's score (%d), at or over the threshold (%d)", ses.score, p.Threshold)
		}
	case *MeetingBooked:
		if ses, err := sessionKind.of(s, rec, p.SessionID); err == nil && ses.status == abandoned {
			return ParamErrorf(EInvalidState, "session_id", "session %s is abandoned; a meeting can be booked on a session in_progress or completed", p.SessionID)
		}
	case *WebhookSecretRotated:
		// The API counts the 7 days from when the request came, a moment
		// before the record's time, or after it by a little when the
		// request joined a group already open: a minute of leeway.
		if p.PreviousExpiresAt > unix(rec.Time)+MaxPreviousSecretSeconds+60 {
			return ParamErrorf(EInvalid, "previous_expires_at", "must be at most 7 days after the record's time")
		}
	case *WebhookRedeliveryRequested:
		// A replay sends again the account's own earlier records only.
		t, err := s.tenantOf(rec)
		if err != nil {
			return nil // apply names it
		}
		for _, seq := range p.Seqs {
			if i := t.events.search(seq); seq >= rec.Seq || i >= t.events.len() || t.events.at(i) != seq {
				return ParamErrorf(EInvalid, "seqs", "seq %d is not an earlier record of account %s", seq, rec.Account)
			}
		}
	}
	return nil
}

func checkIDField(param, prefix, v string) error {
	if _, ok := ParseID(prefix, v); !ok {
		return ParamErrorf(EInvalid, param, "must be an id starting with %s", prefix)
	}
	return nil
}

// Validate checks an account.created payload.
func (p *AccountCreated) Validate() error {
	if !strings.HasPrefix(p.AccountID, "acc_") {
		return ParamErrorf(EInvalid, "account_id", "must start with acc_")
	}
	return CheckAccountInput(p.Name, p.Plan, p.RateLimitPerMinute)
}

func checkKeyID(v string) error {
	if !strings.HasPrefix(v, "key_") {
		return ParamErrorf(EInvalid, "key_id", "must start with key_")
	}
	return nil
}

// Validate checks an api_key.created payload.
func (p *APIKeyCreated) Validate() error {
	if err := checkKeyID(p.KeyID); err != nil {
		return err
	}
	if b, err := hex.DecodeString(p.KeyHash); err != nil || len(b) != 32 || p.KeyHash != strings.ToLower(p.KeyHash) {
		return ParamErrorf(EInvalid, "key_hash", "must be the lowercase hex SHA-256 of the key")
	}
	return nil
}

// Validate checks an api_key.revoked payload.
func (p *APIKeyRevoked) Validate() error { return checkKeyID(p.KeyID) }

// Validate checks an agent.created payload.
func (p *AgentCreated) Validate() error {
	if err := checkIDField("agent_id", PrefixAgent, p.AgentID); err != nil {
		return err
	}
	in := AgentInput{Name: p.Name, SandboxURL: p.SandboxURL, Persona: &p.Persona, Status: &p.Status}
	return in.Validate()
}

// Validate checks an agent.updated payload.
func (p *AgentUpdated) Validate() error {
	if err := checkIDField("agent_id", PrefixAgent, p.AgentID); err != nil {
		return err
	}
	patch := AgentPatch{Name: p.Name, SandboxURL: p.SandboxURL, Persona: p.Persona, Status: p.Status}
	return patch.Validate()
}

// Validate checks a contact.created payload.
func (p *ContactCreated) Validate() error {
	if err := checkIDField("contact_id", PrefixContact, p.ContactID); err != nil {
		return err
	}
	in := SessionInput{AgentID: p.AgentID, Contact: &p.Contact}
	return in.Validate()
}

// Validate checks a session.started payload.
func (p *SessionStarted) Validate() error {
	return firstError(checkIDField("session_id", PrefixSession, p.SessionID),
		checkIDField("agent_id", PrefixAgent, p.AgentID), checkIDField("contact_id", PrefixContact, p.ContactID))
}

// Validate checks a session.progressed payload.
func (p *SessionProgressed) Validate() error {
	f := Figures{IntentScore: p.IntentScore, Signals: p.Signals, DurationSeconds: p.DurationSeconds}
	return firstError(checkIDField("session_id", PrefixSession, p.SessionID), f.validate())
}

// Validate checks a session.completed payload.
func (p *SessionCompleted) Validate() error {
	f := Figures{IntentScore: &p.IntentScore, Signals: &p.Signals, DurationSeconds: &p.DurationSeconds, ReplayURL: &p.ReplayURL}
	return firstError(checkIDField("session_id", PrefixSession, p.SessionID), f.validate())
}

// Validate checks a session.abandoned payload.
func (p *SessionAbandoned) Validate() error {
	f := Figures{IntentScore: p.IntentScore, Signals: p.Signals, DurationSeconds: p.DurationSeconds, ReplayURL: p.ReplayURL}
	return firstError(checkIDField("session_id", PrefixSession, p.SessionID), f.validate())
}

// Validate checks a lead.hot payload.
func (p *LeadHot) Validate() error {
	return firstError(checkIDField("session_id", PrefixSession, p.SessionID),
		checkRange("intent_score", &p.IntentScore, maxScore), checkRange("threshold", &p.Threshold, maxScore))
}

// Validate checks a meeting.booked payload.
func (p *MeetingBooked) Validate() error {
	at, err := checkTime("scheduled_at", p.ScheduledAt)
	if err == nil && at != p.ScheduledAt {
		err = ParamErrorf(EInvalid, "scheduled_at", "must be UTC, whole seconds, as %s", at)
	}
	return firstError(checkIDField("session_id", PrefixSession, p.SessionID), err, checkURL("calendar_link", p.CalendarLink))
}

// Validate checks a webhook.registered payload.
func (p *WebhookRegistered) Validate() error {
	if err := checkIDField("webhook_id", PrefixWebhook, p.WebhookID); err != nil {
		return err
	}
	if len(p.Secret) == 0 {
		return ParamErrorf(EInvalid, "secret", "must be sealed")
	}
	in := WebhookInput{URL: p.URL, Events: p.Events}
	return in.Validate(true)
}

// Validate checks a webhook.deleted payload.
func (p *WebhookDeleted) Validate() error {
	return checkIDField("webhook_id", PrefixWebhook, p.WebhookID)
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// UnmarshalJSON requires exactly the three members, each an integer: a
// partial breakdown would silently zero the others.
func (s *Signals) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return ParamErrorf(EInvalid, "signals", "signals must be an object {interest, objections, buying_signals}")
	}
	fields := []struct {
		name string
		dst  *int
	}{{"interest", &s.Interest}, {"objections", &s.Objections}, {"buying_signals", &s.BuyingSignals}}
	for name := range m {
		if name != "interest" && name != "objections" && name != "buying_signals" {
			return ParamErrorf(EInvalid, "signals."+name, "unknown field %q", "signals."+name)
		}
	}
	for _, f := range fields {
		raw, ok := m[f.name]
		if !ok {
			return ParamErrorf(EInvalid, "signals."+f.name, "signals must have interest, objections and buying_signals; %s is missing", f.name)
		}
		if err := json.Unmarshal(raw, f.dst); err != nil || string(raw) == "null" {
			return ParamErrorf(EInvalid, "signals."+f.name, "signals.%s must be an integer", f.name)
		}
	}
	return nil
}
