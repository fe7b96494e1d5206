package projections

import "demosvc/eventlog/msgp"

// Encoders of the payloads the writer appends most (the types with a
// decoder in decoders.go), without msgpack's reflection: see
// eventlog.PayloadEncoder. Each writes what the reflective encoder writes
// for it: a map of the fields under their json names, in the struct's
// order, compact integers, nil for a nil pointer. encoders_test.go holds
// the bytes equal on random payloads; a field added to one of these types
// needs its line here, or the test fails.

func appendStrField(b []byte, name, v string) []byte {
	return msgp.AppendStr(msgp.AppendStr(b, name), v)
}

func appendIntField(b []byte, name string, v int) []byte {
	return msgp.AppendInt(msgp.AppendStr(b, name), int64(v))
}

func appendStrPtrField(b []byte, name string, v *string) []byte {
	b = msgp.AppendStr(b, name)
	if v == nil {
		return msgp.AppendNil(b)
	}
	return msgp.AppendStr(b, *v)
}

func appendIntPtrField(b []byte, name string, v *int) []byte {
	b = msgp.AppendStr(b, name)
	if v == nil {
		return msgp.AppendNil(b)
	}
	return msgp.AppendInt(b, int64(*v))
}

func (s *Signals) appendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 3)
	b = appendIntField(b, "interest", s.Interest)
	b = appendIntField(b, "objections", s.Objections)
	return appendIntField(b, "buying_signals", s.BuyingSignals)
}

func appendSignalsPtrField(b []byte, name string, s *Signals) []byte {
	b = msgp.AppendStr(b, name)
	if s == nil {
		return msgp.AppendNil(b)
	}
	return s.appendPayload(b)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *AgentCreated) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 5)
	b = appendStrField(b, "agent_id", p.AgentID)
	b = appendStrField(b, "name", p.Name)
	b = appendStrField(b, "sandbox_url", p.SandboxURL)
	b = appendStrField(b, "persona", p.Persona)
	return appendStrField(b, "status", p.Status)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *AgentUpdated) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 5)
	b = appendStrField(b, "agent_id", p.AgentID)
	b = appendStrPtrField(b, "name", p.Name)
	b = appendStrPtrField(b, "sandbox_url", p.SandboxURL)
	b = appendStrPtrField(b, "persona", p.Persona)
	return appendStrPtrField(b, "status", p.Status)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *ContactCreated) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 4)
	b = appendStrField(b, "contact_id", p.ContactID)
	b = msgp.AppendMapLen(msgp.AppendStr(b, "contact"), 3)
	b = appendStrField(b, "name", p.Contact.Name)
	b = appendStrField(b, "email", p.Contact.Email)
	b = appendStrField(b, "company", p.Contact.Company)
	b = appendStrField(b, "session_id", p.SessionID)
	return appendStrField(b, "agent_id", p.AgentID)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *SessionStarted) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 3)
	b = appendStrField(b, "session_id", p.SessionID)
	b = appendStrField(b, "agent_id", p.AgentID)
	return appendStrField(b, "contact_id", p.ContactID)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *SessionProgressed) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 4)
	b = appendStrField(b, "session_id", p.SessionID)
	b = appendIntPtrField(b, "intent_score", p.IntentScore)
	b = appendSignalsPtrField(b, "signals", p.Signals)
	return appendIntPtrField(b, "duration_seconds", p.DurationSeconds)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *LeadHot) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 3)
	b = appendStrField(b, "session_id", p.SessionID)
	b = appendIntField(b, "intent_score", p.IntentScore)
	return appendIntField(b, "threshold", p.Threshold)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *SessionCompleted) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 5)
	b = appendStrField(b, "session_id", p.SessionID)
	b = appendIntField(b, "intent_score", p.IntentScore)
	b = p.Signals.appendPayload(msgp.AppendStr(b, "signals"))
	b = appendIntField(b, "duration_seconds", p.DurationSeconds)
	return appendStrField(b, "replay_url", p.ReplayURL)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *SessionAbandoned) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 5)
	b = appendStrField(b, "session_id", p.SessionID)
	b = appendIntPtrField(b, "intent_score", p.IntentScore)
	b = appendSignalsPtrField(b, "signals", p.Signals)
	b = appendIntPtrField(b, "duration_seconds", p.DurationSeconds)
	return appendStrPtrField(b, "replay_url", p.ReplayURL)
}

// AppendPayload implements eventlog.PayloadEncoder.
func (p *MeetingBooked) AppendPayload(b []byte) []byte {
	b = msgp.AppendMapLen(b, 3)
	b = appendStrField(b, "session_id", p.SessionID)
	b = appendStrField(b, "scheduled_at", p.ScheduledAt)
	return appendStrField(b, "calendar_link", p.CalendarLink)
}
