package projections

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/btree"
	"github.com/oklog/ulid/v2"

	"demosvc/eventlog"
)

// ID is the 16 bytes of an entity id after its prefix: ids are kept in
// binary, which halves what a million sessions cost in memory.
type ID = ulid.ULID

// Prefixes of entity ids.
const (
	PrefixAgent   = "agt_"
	PrefixSession = "ses_"
	PrefixContact = "cnt_"
	PrefixWebhook = "wh_"
)

// ParseID parses prefix + 26 ULID characters (either case).
func ParseID(prefix, s string) (ID, bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != ulid.EncodedSize {
		return ID{}, false
	}
	id, err := ulid.ParseStrict(rest) // either case
	return id, err == nil
}

// canonicalID returns id as FormatID renders it if it parses as an id of
// prefix, else id unchanged (for the lookup to refuse). An id with no
// upper-case letter is returned as it is, without parsing or allocating:
// the lower-case form is FormatID's.
func canonicalID(prefix, id string) string {
	for i := 0; i < len(id); i++ {
		if 'A' <= id[i] && id[i] <= 'Z' {
			if v, ok := ParseID(prefix, id); ok {
				return FormatID(prefix, v)
			}
			return id
		}
	}
	return id
}

// FormatID renders an id as the API shows it: prefix and 26 lowercase
// characters.
func FormatID(prefix string, id ID) string { return eventlog.FormatID(prefix, id) }

// Agent statuses.
const (
	AgentActive   = "active"
	AgentInactive = "inactive"
)

// Session statuses, in the order of their index.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusAbandoned  = "abandoned"
)

type sessionStatus uint8

const (
	inProgress sessionStatus = iota
	completed
	abandoned
	statusCount
)

var statusNames = [statusCount]string{StatusInProgress, StatusCompleted, StatusAbandoned}

func (s sessionStatus) String() string { return statusNames[s] }

// parseStatus returns the status named s.
func parseStatus(s string) (sessionStatus, bool) {
	for i, n := range statusNames {
		if n == s {
			return sessionStatus(i), true
		}
	}
	return 0, false
}

// tenant is everything of one account, indexed for its lists.
type tenant struct {
	account  *Account
	agents   slice[*agent] // creation order
	contacts list[uint32]  // creation order, by number in the state's table
	emails   emailIndex    // by emailKey
	sessions list[uint32]  // creation order, by number in the state's table
	byStatus [statusCount]*btree.BTreeG[sesRef]
	webhooks slice[*webhook]       // registration order; deleted ones removed
	hot      *btree.BTreeG[sesRef] // sessions whose lead turned hot, by seq
	stats    tenantStats           // the overview's counters (stats.go)
	// events are the seqs of every record of the account: the audit log
	// and its export read them newest first (seqindex.go).
	events seqList
	num    uint32 // in State.tenantNum
}

// sesRef is a session in a tenant's trees by status and of hot leads: its
// seq, their order, and its number in the state's sessions table. The
// trees hold no pointers, so their million items are nothing for the
// garbage collector to visit (with pointers, one collection at a million
// sessions took 10 ms more, of about 100).
type sesRef struct {
	seq uint64
	n   uint32
}

// ref returns ses's entry in its tenant's trees.
func (s *State) ref(ses *session) sesRef { return sesRef{ses.seq, ses.num} }

// sessionsOf has visit see the session of each entry of a tenant's tree.
func (s *State) sessionsOf(visit func(*session) bool) func(sesRef) bool {
	return func(r sesRef) bool { return visit(s.sessions.num(r.n)) }
}

// emailKey is how a tenant indexes its contacts' e-mails: compared
// case-insensitively, so a known contact is reused whatever its case.
// isKeyOf compares with it without making it, and must change with it.
func emailKey(email string) string { return strings.ToLower(email) }

// isKeyOf reports whether key is emailKey(email) without making the key,
// which for an address with capitals is an allocation per lookup: it
// lowers email a rune at a time as strings.ToLower does (an invalid byte
// becomes U+FFFD) and compares as it goes.
func isKeyOf(key, email string) bool {
	var buf [utf8.UTFMax]byte
	for _, r := range email {
		low := utf8.AppendRune(buf[:0], unicode.ToLower(r))
		if len(key) < len(low) || key[:len(low)] != string(low) {
			return false
		}
		key = key[len(low):]
	}
	return key == ""
}

// addTenant makes and numbers the tenant of a new account.
func (s *State) addTenant(a *Account) *tenant {
	t := newTenant(a)
	t.num = uint32(len(s.tenantNum))
	s.tenantNum = append(s.tenantNum, t)
	s.tenants[a.ID] = t
	return t
}

func newTenant(a *Account) *tenant {
	t := &tenant{account: a}
	bySeq := func(a, b sesRef) bool { return a.seq < b.seq }
	for i := range t.byStatus {
		t.byStatus[i] = btree.NewG(32, bySeq)
	}
	t.hot = btree.NewG(32, bySeq)
	return t
}

type agent struct {
	id         ID
	tenant     *tenant
	seq        uint64 // of agent.created: the list order
	name       string
	sandboxURL string
	persona    string
	active     bool
	createdAt  int64
	updatedAt  int64
	sessions   list[uint32] // creation order, by number in the state's table
	meetings   uint32       // meetings booked in its sessions
	num        uint32       // in State.agentNum
}

// contact holds no pointer, as a session does not: its tenant is a
// number, its strings are textRefs, and its sessions are its first one's
// number and, from its second, a list of the state's (contactSessions).
type contact struct {
	id        ID
	seq       uint64
	createdAt int64
	name      textRef
	email     textRef
	company   textRef
	tenant    uint32 // State.tenantNum
	num       uint32 // in the state's contacts table
	// first is 1 + the number of its first session, 0 before it has one;
	// more is 1 + the number in State.contactMore of the list of its
	// later sessions, 0 until its second.
	first, more uint32
}

// session is laid out small: a million of them must fit in 400 MB with
// every index. It holds no pointer: what it refers to, it names by number
// (its agent, its contact, its meeting and its timeline) or by a textRef
// (its replay URL). The blocks of the sessions table are then memory the
// garbage collector never scans; with five pointers a session, marking
// them was two thirds of a collection's work at 600,000 sessions (33 ms
// of a full collection, 11 ms without them; issue 14).
type session struct {
	id        ID
	seq       uint64 // of session.started: the list order
	startedAt int64
	endedAt   int64   // 0 while in progress
	replayURL textRef // in the state's text
	num       uint32  // in the state's sessions table
	agent     uint32  // its number: State.agentNum
	contact   uint32  // its number in the state's contacts table
	// meeting is 1 + the number of its meeting in the state's meetings, 0
	// for none.
	meeting  uint32
	duration int32
	status   sessionStatus
	score    uint8
	signals  [3]uint8 // interest, objections, buying_signals
	hot      bool
	// hotSignals are the signals when the lead turned hot: the lead.hot
	// webhook carries them, whatever came after.
	hotSignals [3]uint8
	// The session's records after session.started (progress, lead.hot, the
	// end, the meeting), its timeline, are the first nEvents seqs of the
	// timeline that timeline names in the state's timelines (blocks.go). A
	// pre-image kept for a snapshot (snapshot_cut.go) keeps its own ref and
	// nEvents, and so its own timeline, while the session's grows.
	timeline timelineRef
	nEvents  uint32
}

type meeting struct {
	scheduledAt  textRef
	calendarLink textRef
	seq          uint64 // of meeting.booked: a webhook of an earlier event shows no meeting
}

// addAgent indexes a new agent and numbers it.
func (s *State) addAgent(a *agent) {
	a.num = uint32(len(s.agentNum))
	s.agentNum = append(s.agentNum, a)
	s.agents[a.id] = a
}

// agentOf returns ses's agent.
func (s *State) agentOf(ses *session) *agent { return s.agentNum[ses.agent] }

// tenantOfContact returns the tenant c belongs to.
func (s *State) tenantOfContact(c *contact) *tenant { return s.tenantNum[c.tenant] }

// contactOf returns ses's contact.
func (s *State) contactOf(ses *session) *contact { return s.contacts.num(ses.contact) }

// tenantOfSession returns the tenant ses belongs to.
func (s *State) tenantOfSession(ses *session) *tenant { return s.agentOf(ses).tenant }

// meetingOf returns ses's meeting, or nil.
func (s *State) meetingOf(ses *session) *meeting {
	if ses.meeting == 0 {
		return nil
	}
	return s.meetings.ptr(int(ses.meeting - 1))
}

// eventsOf returns the seqs of ses's timeline. The caller must not keep
// the slice past the state's lock.
func (s *State) eventsOf(ses *session) []uint64 { return s.timelines.get(ses.timeline, ses.nEvents) }

func unix(t time.Time) int64 { return t.Unix() }

func stamp(sec int64) Timestamp { return Timestamp(time.Unix(sec, 0)) }

// apiTime renders unix seconds as the API shows times. Views carry plain
// strings rather than Timestamps: encoding/json re-validates every custom
// marshaller's output, which a list would pay for each timestamp.
func apiTime(sec int64) string {
	var buf [32]byte
	return string(appendTime(buf[:0], sec))
}

// appendTime appends sec as apiTime shows it. It writes the digits
// itself: Format interprets its layout on every call, and a page of 20
// sessions renders up to 60 times.
func appendTime(b []byte, sec int64) []byte {
	t := time.Unix(sec, 0).UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, timeFormat)
	}
	h, mi, s := t.Clock()
	two := func(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }
	b = two(two(b, y/100), y%100)
	b = two(append(b, '-'), int(mo))
	b = two(append(b, '-'), d)
	b = two(append(b, 'T'), h)
	b = two(append(b, ':'), mi)
	b = two(append(b, ':'), s)
	return append(b, 'Z')
}

// AgentView is an agent as the API shows it.
type AgentView struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	SandboxURL string  `json:"sandbox_url"`
	Persona    *string `json:"persona,omitempty"`
	Status     string  `json:"status"`
	CreatedAt  string  `json:"created_at"`
	UpdatedAt  string  `json:"updated_at"`
}

func (a *agent) view(withPersona bool) AgentView {
	v := AgentView{
		ID: FormatID(PrefixAgent, a.id), Name: a.name, SandboxURL: a.sandboxURL, Status: a.status(),
		CreatedAt: apiTime(a.createdAt), UpdatedAt: apiTime(a.updatedAt),
	}
	if withPersona {
		p := a.persona
		v.Persona = &p
	}
	return v
}

func (a *agent) status() string {
	if a.active {
		return AgentActive
	}
	return AgentInactive
}

// ContactView is a contact as the API shows it.
type ContactView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Email     string `json:"email"`
	Company   string `json:"company"`
	CreatedAt string `json:"created_at"`
}

func (s *State) contactView(c *contact) ContactView {
	return ContactView{ID: FormatID(PrefixContact, c.id), Name: s.text.str(c.name), Email: s.text.str(c.email),
		Company: s.text.str(c.company), CreatedAt: apiTime(c.createdAt)}
}
