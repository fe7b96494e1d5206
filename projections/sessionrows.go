package projections

import (
	"sort"
	"strings"
	"time"
)

// The dashboard's lists of sessions and contacts. Every list walks the
// smallest index that fits its filters, newest first, and stops after a
// page, or after examining Budget entries that did not match (then it says
// where to continue): a page costs what it shows plus a bounded search,
// whatever the account's size.

// SessionRow is a session as the dashboard shows it.
type SessionRow struct {
	ID, Status                             string
	AgentID, AgentName                     string
	ContactID, ContactName, ContactEmail   string
	ContactCompany                         string
	IntentScore, DurationSeconds           int
	Signals                                Signals
	Hot                                    bool
	StartedAt                              time.Time
	EndedAt                                *time.Time
	ReplayURL                              string
	MeetingScheduledAt, MeetingCalendarURL string
	HasMeeting                             bool
}

func (s *State) row(ses *session) SessionRow {
	a, c := s.agentOf(ses), s.contactOf(ses)
	r := SessionRow{
		ID: FormatID(PrefixSession, ses.id), Status: ses.status.String(),
		AgentID: FormatID(PrefixAgent, a.id), AgentName: a.name,
		ContactID: FormatID(PrefixContact, c.id), ContactName: s.text.str(c.name),
		ContactEmail: s.text.str(c.email), ContactCompany: s.text.str(c.company),
		IntentScore: int(ses.score), DurationSeconds: int(ses.duration),
		Signals: Signals{Interest: int(ses.signals[0]), Objections: int(ses.signals[1]), BuyingSignals: int(ses.signals[2])},
		Hot:     ses.hot, StartedAt: time.Unix(ses.startedAt, 0).UTC(), ReplayURL: s.text.str(ses.replayURL),
	}
	if ses.endedAt != 0 {
		t := time.Unix(ses.endedAt, 0).UTC()
		r.EndedAt = &t
	}
	if m := s.meetingOf(ses); m != nil {
		r.HasMeeting, r.MeetingScheduledAt, r.MeetingCalendarURL = true, s.text.str(m.scheduledAt), s.text.str(m.calendarLink)
	}
	return r
}

// SessionRowOf returns one session of account as the dashboard shows it.
func (p *Projections) SessionRowOf(account, sessionID string) (SessionRow, error) {
	return oneIn(p, sessionKind, account, sessionID, (*State).row)
}

// SessionQuery selects a page of the dashboard's session list.
type SessionQuery struct {
	SessionFilter
	HotOnly  bool
	From, To time.Time // started within [From, To]; zero: open
	// After is the id of the last session examined by the page before
	// ("": from the newest).
	After  string
	Limit  int
	Budget int // sessions examined at most beyond the page; 0: unbounded
}

// RowPage is a page of a dashboard list. Next is the id to continue after
// ("" on the last page); Searched says the page ended because the search
// budget ran out, not because it was full.
type RowPage[T any] struct {
	Rows     []T
	Next     string
	Searched int
	Partial  bool
}

// SessionRows returns the page q selects.
func (p *Projections) SessionRows(account string, q SessionQuery) (RowPage[SessionRow], error) {
	var out RowPage[SessionRow]
	var status sessionStatus
	if q.Status != "" {
		var ok bool
		if status, ok = parseStatus(q.Status); !ok {
			return out, ParamErrorf(EInvalid, "status", "must be in_progress, completed or abandoned, got %q", q.Status)
		}
	}
	err := listing(p, sessionKind, account, ListQuery{StartingAfter: q.After}, func(s *State, t *tenant, after uint64) {
		var agentF *agent
		var contactF *contact
		var ok bool
		if q.AgentID != "" {
			if agentF, ok = agentKind.in(s, account, q.AgentID); !ok {
				return
			}
		}
		if q.ContactID != "" {
			if contactF, ok = contactKind.in(s, account, q.ContactID); !ok {
				return
			}
		}
		// below: walk sessions with seq < below. A To bound starts the
		// walk at the last session started by then (sessions start in
		// seq order, and their start times follow the log's clock).
		below := uint64(1<<63 - 1)
		if after != 0 {
			below = after
		}
		if !q.To.IsZero() {
			all := s.sessionsIn(&t.sessions)
			i := sort.Search(all.len(), func(i int) bool { return all.at(i).startedAt > q.To.Unix() })
			if i == 0 {
				return
			}
			below = min(below, all.at(i-1).seq+1)
		}
		from := int64(-1 << 62)
		if !q.From.IsZero() {
			from = q.From.Unix()
		}
		examined := 0
		visit := func(ses *session) bool {
			if ses.startedAt < from {
				return false
			}
			if len(out.Rows) == q.Limit {
				out.Next = out.Rows[len(out.Rows)-1].ID
				return false
			}
			if (agentF == nil || ses.agent == agentF.num) && (contactF == nil || ses.contact == contactF.num) &&
				(q.Status == "" || ses.status == status) && (!q.HotOnly || ses.hot) {
				out.Rows = append(out.Rows, s.row(ses))
				return true
			}
			examined++
			if q.Budget > 0 && examined >= q.Budget {
				out.Next, out.Partial = FormatID(PrefixSession, ses.id), true
				return false
			}
			return true
		}
		switch {
		case contactF != nil:
			descendBelow(s.sessionsOfContact(contactF), below, visit)
		case agentF != nil:
			descendBelow(s.sessionsIn(&agentF.sessions), below, visit)
		case q.HotOnly:
			t.hot.DescendLessOrEqual(sesRef{seq: below - 1}, s.sessionsOf(visit))
		case q.Status != "":
			t.byStatus[status].DescendLessOrEqual(sesRef{seq: below - 1}, s.sessionsOf(visit))
		default:
			descendBelow(s.sessionsIn(&t.sessions), below, visit)
		}
		out.Searched = examined
	})
	return out, err
}

// descendBelow walks list (in seq order) from its last entity with a seq
// below below, newest first, until visit returns false.
func descendBelow[T entity, L ordered[T]](list L, below uint64, visit func(T) bool) {
	for i := indexBySeq(list, below) - 1; i >= 0; i-- {
		if !visit(list.at(i)) {
			return
		}
	}
}

// ContactQuery selects a page of the dashboard's contact list.
type ContactQuery struct {
	// Search matches an exact e-mail (any case), or a part of a name or
	// e-mail (any case); "" lists every contact.
	Search string
	After  string // the id of the last contact examined before
	Limit  int
	Budget int // contacts examined at most beyond the page; 0: unbounded
	// Exact looks Search up as an e-mail only: no contact is examined
	// when the account has none with it.
	Exact bool
}

// ContactRow is a contact and how many sessions it had.
type ContactRow struct {
	ContactView
	Sessions int
}

// ContactRows returns the page q selects. An exact e-mail is one lookup.
func (p *Projections) ContactRows(account string, q ContactQuery) (RowPage[ContactRow], error) {
	var out RowPage[ContactRow]
	needle := strings.ToLower(strings.TrimSpace(q.Search))
	err := listing(p, contactKind, account, ListQuery{StartingAfter: q.After}, func(s *State, t *tenant, after uint64) {
		row := func(c *contact) ContactRow {
			return ContactRow{ContactView: s.contactView(c), Sessions: s.sessionsOfContact(c).len()}
		}
		if c := t.emails.get(s, emailKey(needle)); c != nil && q.After == "" {
			out.Rows = append(out.Rows, row(c))
			return
		}
		if q.Exact {
			return
		}
		below := uint64(1<<63 - 1)
		if after != 0 {
			below = after
		}
		examined := 0
		descendBelow(s.contactsIn(&t.contacts), below, func(c *contact) bool {
			if len(out.Rows) == q.Limit {
				out.Next = out.Rows[len(out.Rows)-1].ID
				return false
			}
			if needle == "" || strings.Contains(strings.ToLower(s.text.str(c.name)), needle) ||
				strings.Contains(strings.ToLower(s.text.str(c.email)), needle) {
				out.Rows = append(out.Rows, row(c))
				return true
			}
			examined++
			if q.Budget > 0 && examined >= q.Budget {
				out.Next, out.Partial = FormatID(PrefixContact, c.id), true
				return false
			}
			return true
		})
		out.Searched = examined
	})
	return out, err
}
