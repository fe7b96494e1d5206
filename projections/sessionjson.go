package projections

import (
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"demosvc/eventlog"
)

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does with SetEscapeHTML(false):
// quotes, backslashes and control characters escaped, invalid UTF-8 as
// U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendAPITime(b []byte, sec int64) []byte {
	b = append(b, '"')
	return append(appendTime(b, sec), '"')
}

// appendSession writes the session as the API shows it, straight from the
// state. It is the only renderer of a session, for reads and command
// answers alike: a page of sessions allocates nothing per item, where
// encoding/json of a view struct cost the list benchmark its target.
func (st *State) appendSession(b []byte, s *session) []byte {
	b = append(b, `{"id":"`...)
	b = eventlog.AppendID(b, PrefixSession, s.id)
	b = append(b, `","agent_id":"`...)
	b = eventlog.AppendID(b, PrefixAgent, st.agentOf(s).id)
	b = append(b, `","contact_id":"`...)
	b = eventlog.AppendID(b, PrefixContact, st.contactOf(s).id)
	b = append(b, `","status":"`...)
	b = append(b, s.status.String()...)
	b = append(b, `","intent_score":`...)
	b = strconv.AppendInt(b, int64(s.score), 10)
	b = append(b, `,"duration_seconds":`...)
	b = strconv.AppendInt(b, int64(s.duration), 10)
	b = append(b, `,"meeting_booked":`...)
	b = strconv.AppendBool(b, s.meeting != 0)
	b = append(b, `,"replay_url":`...)
	if s.replayURL == 0 {
		b = append(b, "null"...)
	} else {
		b = appendString(b, st.text.str(s.replayURL))
	}
	b = append(b, `,"signals":{"interest":`...)
	b = strconv.AppendInt(b, int64(s.signals[0]), 10)
	b = append(b, `,"objections":`...)
	b = strconv.AppendInt(b, int64(s.signals[1]), 10)
	b = append(b, `,"buying_signals":`...)
	b = strconv.AppendInt(b, int64(s.signals[2]), 10)
	b = append(b, `},"started_at":`...)
	b = appendAPITime(b, s.startedAt)
	b = append(b, `,"ended_at":`...)
	if s.endedAt == 0 {
		b = append(b, "null"...)
	} else {
		b = appendAPITime(b, s.endedAt)
	}
	// The booked meeting, beside the seed's fields: null until booked.
	b = append(b, `,"meeting":`...)
	if m := st.meetingOf(s); m == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"scheduled_at":`...)
		b = appendString(b, st.text.str(m.scheduledAt))
		b = append(b, `,"calendar_link":`...)
		b = appendString(b, st.text.str(m.calendarLink))
		b = append(b, '}')
	}
	return append(b, '}')
}

// answer is a session command's result: the session's JSON, which
// encoding/json writes through as it is, in a buffer from answers.
func (st *State) answer(s *session) json.RawMessage {
	box, _ := answers.Get().(*[]byte)
	if box == nil {
		return st.appendSession(make([]byte, 0, 512), s)
	}
	b := (*box)[:0]
	*box = nil
	boxes.Put(box)
	return st.appendSession(b, s)
}

// answers keeps the buffers of session commands' answers between
// requests (one a request, garbage as soon as it was written), and boxes
// the pointers they travel in while out of the pool.
var answers, boxes sync.Pool

// ReleaseAnswer gives the buffer of v, the answer of a session command
// (StartSession, ProgressSession, …) that the caller has written and
// no longer uses, to the next command. Any other v is left alone, and so
// is an answer recorded under an Idempotency-Key, which comes back as a
// Replay.
func ReleaseAnswer(v any) {
	if b, ok := v.(json.RawMessage); ok && cap(b) <= 4<<10 {
		box, _ := boxes.Get().(*[]byte)
		if box == nil {
			box = new([]byte)
		}
		*box = b[:0]
		answers.Put(box)
	}
}
