package projections

import "demosvc/eventlog"

// Decoders of the payloads a replay reads most (agents, contacts, sessions,
// meetings), without msgpack's reflection: see eventlog.PayloadDecoder.
// Each says no (false) to any key or value it does not expect, and the
// registry then decodes the bytes through reflection; decoders_test.go
// holds the two equal. A field added to one of these types needs its case
// here, or every payload of the type falls back to reflection (the test
// notices).

// mapFields reads a map, calling field for each key; field reads the value
// and returns false when the key is unknown or the value of another kind.
func mapFields(r *eventlog.PayloadReader, field func(key []byte) bool) bool {
	n, ok := r.Map()
	if !ok {
		return false
	}
	for range n {
		k, ok := r.Key()
		if !ok || !field(k) {
			return false
		}
	}
	return true
}

func (s *Signals) decode(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "interest":
			s.Interest, ok = r.Int()
		case "objections":
			s.Objections, ok = r.Int()
		case "buying_signals":
			s.BuyingSignals, ok = r.Int()
		}
		return ok
	})
}

func decodeSignalsPtr(r *eventlog.PayloadReader) (*Signals, bool) {
	if r.Nil() {
		return nil, true
	}
	s := new(Signals)
	return s, s.decode(r)
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *AgentCreated) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "agent_id":
			p.AgentID, ok = r.Str()
		case "name":
			p.Name, ok = r.Str()
		case "sandbox_url":
			p.SandboxURL, ok = r.Str()
		case "persona":
			p.Persona, ok = r.Str()
		case "status":
			p.Status, ok = r.Str()
		}
		return ok
	})
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *AgentUpdated) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "agent_id":
			p.AgentID, ok = r.Str()
		case "name":
			p.Name, ok = r.StrPtr()
		case "sandbox_url":
			p.SandboxURL, ok = r.StrPtr()
		case "persona":
			p.Persona, ok = r.StrPtr()
		case "status":
			p.Status, ok = r.StrPtr()
		}
		return ok
	})
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *ContactCreated) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "contact_id":
			p.ContactID, ok = r.Str()
		case "contact":
			c := &p.Contact
			ok = mapFields(r, func(k []byte) (ok bool) {
				switch string(k) {
				case "name":
					c.Name, ok = r.Str()
				case "email":
					c.Email, ok = r.Str()
				case "company":
					c.Company, ok = r.Str()
				}
				return ok
			})
		case "session_id":
			p.SessionID, ok = r.Str()
		case "agent_id":
			p.AgentID, ok = r.Str()
		}
		return ok
	})
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *SessionStarted) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "session_id":
			p.SessionID, ok = r.Str()
		case "agent_id":
			p.AgentID, ok = r.Str()
		case "contact_id":
			p.ContactID, ok = r.Str()
		}
		return ok
	})
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *SessionProgressed) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "session_id":
			p.SessionID, ok = r.Str()
		case "intent_score":
			p.IntentScore, ok = r.IntPtr()
		case "signals":
			p.Signals, ok = decodeSignalsPtr(r)
		case "duration_seconds":
			p.DurationSeconds, ok = r.IntPtr()
		}
		return ok
	})
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *LeadHot) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "session_id":
			p.SessionID, ok = r.Str()
		case "intent_score":
			p.IntentScore, ok = r.Int()
		case "threshold":
			p.Threshold, ok = r.Int()
		}
		return ok
	})
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *SessionCompleted) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "session_id":
			p.SessionID, ok = r.Str()
		case "intent_score":
			p.IntentScore, ok = r.Int()
		case "signals":
			ok = p.Signals.decode(r)
		case "duration_seconds":
			p.DurationSeconds, ok = r.Int()
		case "replay_url":
			p.ReplayURL, ok = r.Str()
		}
		return ok
	})
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *SessionAbandoned) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "session_id":
			p.SessionID, ok = r.Str()
		case "intent_score":
			p.IntentScore, ok = r.IntPtr()
		case "signals":
			p.Signals, ok = decodeSignalsPtr(r)
		case "duration_seconds":
			p.DurationSeconds, ok = r.IntPtr()
		case "replay_url":
			p.ReplayURL, ok = r.StrPtr()
		}
		return ok
	})
}

// DecodePayload implements eventlog.PayloadDecoder.
func (p *MeetingBooked) DecodePayload(r *eventlog.PayloadReader) bool {
	return mapFields(r, func(k []byte) (ok bool) {
		switch string(k) {
		case "session_id":
			p.SessionID, ok = r.Str()
		case "scheduled_at":
			p.ScheduledAt, ok = r.Str()
		case "calendar_link":
			p.CalendarLink, ok = r.Str()
		}
		return ok
	})
}
