package projections

import "runtime"

// Snapshots without stalling reads or writes.
//
// Encoding a million sessions takes one to two seconds of CPU, and a
// snapshot is written as it is encoded, at the disk's pace (several
// seconds at a million sessions). Holding the state
// read-locked for all of it would make the writer wait, and with Go's
// RWMutex every reader that arrives after a waiting writer waits too, so
// every request (each authenticates through a read) would stall. Instead
// a snapshot is a cut of the state at seq S, encoded in steps:
//
//   - At the cut, under one short read lock, the cut records S and, for
//     every tenant, its list of agents (a slice header) and its lists of
//     contacts and sessions with their lengths. Those lists are
//     append-only and an element is never overwritten, so the first n
//     elements seen at S stay the same whatever the writer appends after;
//     the encoder reads the lists of contacts and sessions (list, whose
//     add replaces its parts) only under the read lock. The few and small
//     objects (accounts, keys, webhooks) are copied whole.
//   - The encoder then takes the read lock for one step of snapshotStep
//     objects at a time, and lets the writer (and the readers behind it)
//     in between.
//   - Between steps the writer goes on changing agents and sessions. Before
//     apply changes one that existed at S (its seq <= S), it keeps a copy of
//     it as it was (keepAgent, keepSession) in the cut, once; the encoder
//     writes that copy instead of the live object. Objects created after S
//     are not in the cut's lists.
//
// Every change apply makes to an object the cut does not copy must call
// keepAgent or keepSession first: a missed one would write a snapshot
// mixing two moments, silently. TestSnapshotIsTheStateAtItsCut and
// TestStateIsAPureFunctionOfTheLog check every kind of change between
// steps. Contacts never change after creation; their session lists and
// the status indexes are not in the snapshot (they are rebuilt on load).
//
// The alternatives cost more: an immutable (persistent) state would slow
// every write and read for the sake of a snapshot every few minutes, and
// copying the whole state under the lock is a shorter stall but still one
// proportional to the state.

// snapshotStep is how many objects the encoder writes per read lock, and
// between two steps it yields its core: on two cores, an encoder running
// flat out made every reader queue for the CPU as well as for the lock. At
// 4,096 objects a step, the read p99 during encoding was 17x the p99
// without; at 256 without yielding, 1.6–7x; at 64 with it, 1.1–1.2x at a
// million sessions (an encode then took ~2 s instead of ~1 s; it now
// takes as long as the paced write of its chunks).
const snapshotStep = 64

// snapCut is the state at seq, as a snapshot in progress sees it.
type snapCut struct {
	// state is the state cut, read under its read lock: the sessions'
	// agents, contacts, meetings, timelines and text.
	state                      *State
	seq                        uint64
	accounts                   []Account
	keys                       []APIKey
	tenants                    []cutTenant
	agents, contacts, sessions int

	// users is the users' block (usersnapshot.go), encoded at the cut:
	// it is small, and changes with every sign-in.
	users []byte

	// Pre-images, written by the writer under the state's write lock and
	// read by the encoder under its read lock.
	// The values are pointers: with the copy itself as the value, the
	// encoder's `&kept` moved its loop variable to the heap, one
	// allocation for every session of every snapshot (170 MB at a million
	// sessions), changed or not.
	keptAgents   map[*agent]*agent
	keptSessions map[*session]*session
}

// cutTenant is one tenant's lists at the cut.
type cutTenant struct {
	agents   slice[*agent]
	contacts *list[uint32] // append-only: its first nContacts are the cut's
	sessions *list[uint32] // and its first nSessions
	webhooks []webhook
	days     map[int32]dayStats // copied: they change with every session
	events   *seqList           // append-only: its first nEvents are the cut's
	nEvents  int

	nContacts, nSessions int
}

// cutAt returns the cut of s at its seq. The caller holds s at least
// read-locked; the cut only sees changes made after it if it is installed
// as s.cut.
func (s *State) cutAt() *snapCut {
	c := &snapCut{state: s, seq: s.seq, keptAgents: map[*agent]*agent{}, keptSessions: map[*session]*session{}}
	c.accounts = make([]Account, len(s.accountOrder))
	c.tenants = make([]cutTenant, len(s.accountOrder))
	for i, a := range s.accountOrder {
		c.accounts[i] = *a
		t := s.tenants[a.ID]
		ct := cutTenant{agents: t.agents[:len(t.agents):len(t.agents)], contacts: &t.contacts,
			nContacts: t.contacts.len(), sessions: &t.sessions, nSessions: t.sessions.len(), webhooks: make([]webhook, len(t.webhooks)),
			days: t.stats.copyDays(), events: &t.events, nEvents: t.events.len()}
		for j, wh := range t.webhooks {
			ct.webhooks[j] = *wh
		}
		c.tenants[i] = ct
		c.agents += len(ct.agents)
		c.contacts += ct.nContacts
		c.sessions += ct.nSessions
	}
	c.keys = make([]APIKey, len(s.keyOrder))
	for i, k := range s.keyOrder {
		c.keys[i] = *k
	}
	uw := &snapWriter{}
	s.encodeUsers(uw)
	c.users = uw.buf
	return c
}

// keepAgent saves a as it was at the cut in progress, if any, before apply
// changes it.
func (s *State) keepAgent(a *agent) {
	if c := s.cut; c != nil && a.seq <= c.seq {
		if _, ok := c.keptAgents[a]; !ok {
			kept := *a
			c.keptAgents[a] = &kept
		}
	}
}

// keepSession saves ses as it was at the cut in progress, if any, before
// apply changes it.
func (s *State) keepSession(ses *session) {
	if c := s.cut; c != nil && ses.seq <= c.seq {
		if _, ok := c.keptSessions[ses]; !ok {
			kept := *ses
			c.keptSessions[ses] = &kept
		}
	}
}

// encode writes the cut in the snapshot's layout to w. Every step objects
// it calls between, which may let the state change; step 0 never calls it.
// The caller holds the state read-locked, except inside between. It
// returns w's buffer: all of the snapshot for a writer without a sink,
// what emit has not yet handed on for one with. Once w's sink has failed
// (seen after a between), it stops: the rest of the state is not walked
// for a snapshot that will not be kept.
func (c *snapCut) encode(w *snapWriter, step int, between func()) ([]byte, error) {
	w.uint(c.seq)
	w.len(c.agents)
	w.len(c.contacts)
	w.len(c.sessions)
	w.len(len(c.accounts))
	for i := range c.accounts {
		w.account(&c.accounts[i])
	}
	w.len(len(c.keys))
	for i := range c.keys {
		w.key(&c.keys[i])
	}
	n := 0
	tick := func() (stop bool) {
		if n++; step > 0 && n%step == 0 {
			between()
		}
		return w.err != nil
	}
	for i := range c.tenants {
		if !c.encodeTenant(w, &c.tenants[i], tick) {
			return w.buf, w.err
		}
	}
	// Dashboard users: one block at the end (usersnapshot.go).
	w.buf = append(w.buf, c.users...)
	return w.buf, w.err
}

// encodeTenant writes one tenant of the cut, calling tick after each
// agent, contact and session and every seqsPerTick seqs. It returns
// false (not finished) as soon as tick says to stop.
func (c *snapCut) encodeTenant(w *snapWriter, t *cutTenant, tick func() bool) bool {
	if !encodeEach(w, &t.agents, len(t.agents), c.keptAgents, w.agent, tick) ||
		!encodeEach(w, c.state.contactsIn(t.contacts), t.nContacts, nil, func(ct *contact) { w.contact(c.state, ct) }, tick) ||
		!encodeEach(w, c.state.sessionsIn(t.sessions), t.nSessions, c.keptSessions, func(ses *session) { w.session(c.state, ses) }, tick) {
		return false
	}
	w.len(len(t.webhooks))
	for i := range t.webhooks {
		w.webhook(&t.webhooks[i])
	}
	w.days(t.days)
	return w.seqs(t.events, t.nEvents, tick)
}

// encodeEach writes n, then each of the first n values of list with
// write, or the pre-image kept for it at the cut, calling tick after
// each; false as soon as tick says to stop.
func encodeEach[T any, L ordered[*T]](w *snapWriter, list L, n int, kept map[*T]*T, write func(*T), tick func() bool) bool {
	w.len(n)
	for i := range n {
		v := list.at(i)
		if pre, ok := kept[v]; ok {
			v = pre
		}
		write(v)
		if tick() {
			return false
		}
	}
	return true
}

// encodeInSteps encodes the state as it is now into w, holding the read
// lock for one step of step objects at a time. Between steps, with the
// lock released, it hands w's sink its whole chunks (the sink may wait:
// it paces the disk), then runs between, if set. What is left in w's
// buffer when it returns is the caller's to emit. The caller holds
// snapMu, so only one cut is installed.
func (p *Projections) encodeInSteps(w *snapWriter, step int, between func()) (seq uint64, err error) {
	p.rlock()
	defer p.mu.RUnlock()
	// Only the writer reads s.cut, under the write lock, so setting it
	// under the read lock is safe; this goroutine alone writes it.
	s := p.state
	cut := s.cutAt()
	s.cut = cut
	defer func() { s.cut = nil }()
	_, err = cut.encode(w, step, func() {
		p.mu.RUnlock()
		w.emit(false)
		w.reserve(snapHeadroom)
		runtime.Gosched()
		if between != nil {
			between()
		}
		p.rlock()
	})
	return cut.seq, err
}

// newSnapWriter returns a writer that hands sink the snapshot in chunks of
// snapshotChunk bytes (the last may be shorter), through one buffer of a
// chunk and the headroom: a snapshot is written as it is encoded, never
// held whole. Encoding into one buffer of all of it allocated the
// snapshot's size every snapshot (200 MB at a million sessions, about 512
// bytes for every event written), faulted all of it in fresh, and raised
// the process's peak memory by as much.
func newSnapWriter(sink func(chunk []byte) error) *snapWriter {
	return &snapWriter{buf: make([]byte, 0, snapshotChunk+snapHeadroom), sink: sink}
}

// emit hands the sink every whole chunk in the buffer, and with final the
// rest too, at least one chunk in all. The caller must not hold the state
// locked: the sink writes to disk. Once the sink has failed, emit drops
// what the encoder writes, and the encoder stops at its next step.
func (w *snapWriter) emit(final bool) {
	if w.err != nil {
		w.buf = w.buf[:0]
		return
	}
	off := 0
	for w.err == nil {
		rest := len(w.buf) - off
		if rest < snapshotChunk && !(final && (rest > 0 || w.chunks == 0)) {
			break
		}
		end := off + min(rest, snapshotChunk)
		w.err = w.sink(w.buf[off:end])
		w.size += int64(end - off)
		w.chunks++
		off = end
	}
	w.buf = w.buf[:copy(w.buf, w.buf[off:])]
}

// snapHeadroom is the free space the snapshot's buffer keeps before each
// step of the encoder, far more than a step of snapshotStep objects
// writes: its append then never grows the buffer under the lock.
const snapHeadroom = 1 << 20

// reserve grows w's buffer, if needed, so that n more bytes fit without
// a copy.
func (w *snapWriter) reserve(n int) {
	if cap(w.buf)-len(w.buf) >= n {
		return
	}
	grown := make([]byte, len(w.buf), max(2*cap(w.buf), len(w.buf)+n))
	copy(grown, w.buf)
	w.buf = grown
}
