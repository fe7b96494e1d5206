package projections

import (
	"hash/maphash"
	"iter"
	"strings"
)

// A million sessions with their contacts were seven and a half million
// small objects: each session, contact, contact's list of sessions and
// session's list of events one, and each name, e-mail, company and
// replay URL another. The garbage collector finds and marks every object
// on its own at every cycle, so with a large state the cycles that every
// write's garbage brings cost more and more: GC marking went from 15% to
// 27% of the server's CPU as a benchmark's state grew to a million
// sessions (issue 14). The state now takes these values from shared
// blocks: a million sessions are about twenty thousand of them. Nothing a
// block holds is ever removed from the state or changed (a session ends
// once, a second meeting is refused), so no block holds memory that is no
// longer used, but for the seqs a timeline left when it moved.
//
// Sessions and contacts then hold no pointer at all (model.go): what they
// refer to they name by number, strings by textRef, timelines by
// timelineRef, so the collector never scans their blocks either.

// blockLen is the number of values in one block.
const blockLen = 256

// textBlockLen is the size of one block of text; longer strings are kept
// as they are, objects of their own.
const textBlockLen = 32 << 10

// text keeps strings in shared blocks.
type text struct {
	b strings.Builder
	// For textRefs: the blocks before b's, and the strings kept as
	// objects of their own.
	full []string
	long []string
}

// reserve starts a new block unless n bytes fit in the current one. The
// strings of the refs already handed out keep the old block: a Builder
// only ever appends to its buffer, and String returns it without a copy.
func (t *text) reserve(n int) {
	if t.b.Cap()-t.b.Len() < n {
		if t.b.Cap() > 0 {
			t.full = append(t.full, t.b.String())
		}
		t.b = strings.Builder{}
		t.b.Grow(textBlockLen)
	}
}

// textRef is a string kept by text, named by a number rather than a
// pointer, so that what holds it holds no pointer: 0 is "", a ref with
// refLong set is t.long[ref &^ refLong], and any other is the len (low 16
// bits) bytes at offset (the next 16) in block ref>>32.
type textRef uint64

const refLong textRef = 1 << 63

// keep returns a ref to a copy of s.
func (t *text) keep(s string) textRef {
	if len(s) == 0 {
		return 0
	}
	if len(s) > textBlockLen/16 {
		t.long = append(t.long, s)
		return refLong | textRef(len(t.long)-1)
	}
	ref := t.next(len(s))
	t.b.WriteString(s)
	return ref
}

// keepBytes returns a ref to p as a string.
func (t *text) keepBytes(p []byte) textRef {
	if len(p) == 0 {
		return 0
	}
	if len(p) > textBlockLen/16 {
		t.long = append(t.long, string(p))
		return refLong | textRef(len(t.long)-1)
	}
	ref := t.next(len(p))
	t.b.Write(p)
	return ref
}

// next returns the ref of the n bytes about to be written to t.b, after
// making room for them.
func (t *text) next(n int) textRef {
	t.reserve(n)
	return textRef(len(t.full))<<32 | textRef(t.b.Len())<<16 | textRef(n)
}

// str returns the string of ref.
func (t *text) str(ref textRef) string {
	switch {
	case ref == 0:
		return ""
	case ref&refLong != 0:
		return t.long[ref&^refLong]
	}
	block, start, n := int(ref>>32), int(ref>>16&0xffff), int(ref&0xffff)
	all := t.b.String()
	if block < len(t.full) {
		all = t.full[block]
	}
	return all[start : start+n]
}

// addContactSession appends ses to c's sessions: most contacts have one,
// which the contact holds itself.
func (s *State) addContactSession(c *contact, ses *session) {
	if c.first == 0 {
		c.first = ses.num + 1
		return
	}
	if c.more == 0 {
		s.contactMore.add(list[uint32]{})
		c.more = uint32(s.contactMore.len())
	}
	s.contactMore.ptr(int(c.more - 1)).add(ses.num)
}

// contactSessions is a contact's sessions as an ordered list. It holds a
// pointer into the state's contactMore, which the next add there may
// move: use it within the lock it was made under, and before any change.
type contactSessions struct {
	first uint32        // 1 + its first session's number; 0: none
	more  *list[uint32] // the later ones; nil: none
	table *table[session]
}

// sessionsOfContact returns c's sessions, in the order they started.
func (s *State) sessionsOfContact(c *contact) contactSessions {
	l := contactSessions{first: c.first, table: &s.sessions}
	if c.more != 0 {
		l.more = s.contactMore.ptr(int(c.more - 1))
	}
	return l
}

func (l contactSessions) len() int {
	switch {
	case l.first == 0:
		return 0
	case l.more == nil:
		return 1
	}
	return 1 + l.more.len()
}

func (l contactSessions) at(i int) *session {
	if i == 0 {
		return l.table.num(l.first - 1)
	}
	return l.table.num(l.more.at(i - 1))
}

// numbered is a list of numbers in a table read as the table's values.
type numbered[T any] struct {
	nums  *list[uint32]
	table *table[T]
}

func (l numbered[T]) len() int    { return l.nums.len() }
func (l numbered[T]) at(i int) *T { return l.table.num(l.nums.at(i)) }

// contactsIn returns l, a list of numbers in s's contacts table, as the
// contacts.
func (s *State) contactsIn(l *list[uint32]) numbered[contact] {
	return numbered[contact]{l, &s.contacts}
}

// sessionsIn returns l, a list of numbers in s's sessions table, as the
// sessions.
func (s *State) sessionsIn(l *list[uint32]) numbered[session] {
	return numbered[session]{l, &s.sessions}
}

// addEvent appends seq to the session's timeline, which most often ends
// up with two: its progress and its end.
func (s *State) addEvent(ses *session, seq uint64) {
	ses.timeline = s.timelines.add(ses.timeline, ses.nEvents, seq)
	ses.nEvents++
}

// timelines keeps the sessions' timelines in shared chunks of seqs, each
// named by a number (a timelineRef) rather than a slice, so that a session
// holds no pointer. A timeline of n seqs has room for roomFor(n): its next
// seq goes in place while there is room, and otherwise the timeline moves
// to twice the room, leaving its seqs where they were, which a snapshot's
// pre-image of the session still reads (snapshot_cut.go). A timeline that
// outgrows a chunk moves to a slice of its own, in long.
type timelines struct {
	chunks [][]uint64 // each timelineChunk long
	next   int        // where the next room starts, counting across chunks
	long   [][]uint64
}

// timelineRef names a timeline: 0 is none, one with refLongTimeline set
// is long[ref &^ refLongTimeline], and any other starts at ref - 1 in the
// chunks.
type timelineRef = uint32

const (
	timelineChunk   = 4096
	refLongTimeline = 1 << 31
)

// roomFor is the room of a timeline of n seqs, n > 0: 2, then the
// smallest power of two that holds them.
func roomFor(n uint32) uint32 {
	r := uint32(2)
	for r < n {
		r *= 2
	}
	return r
}

// add appends seq to the timeline ref of n seqs and returns its ref, which
// changes when it moves.
func (t *timelines) add(ref timelineRef, n uint32, seq uint64) timelineRef {
	if ref&refLongTimeline != 0 {
		i := ref &^ refLongTimeline
		t.long[i] = append(t.long[i][:n], seq)
		return ref
	}
	if ref != 0 && n < roomFor(n) {
		start := int(ref - 1)
		t.chunks[start/timelineChunk][start%timelineChunk+int(n)] = seq
		return ref
	}
	room := 2 * n
	if n == 0 {
		room = 2
	}
	if room > timelineChunk || t.next+int(room) >= refLongTimeline-1 {
		moved := make([]uint64, n, 2*n)
		copy(moved, t.get(ref, n))
		t.long = append(t.long, append(moved, seq))
		return refLongTimeline | timelineRef(len(t.long)-1)
	}
	if t.next+int(room) > len(t.chunks)*timelineChunk {
		t.next = len(t.chunks) * timelineChunk
		t.chunks = append(t.chunks, make([]uint64, timelineChunk))
	}
	start := t.next
	t.next += int(room)
	to := t.chunks[start/timelineChunk][start%timelineChunk:]
	copy(to, t.get(ref, n))
	to[n] = seq
	return timelineRef(start + 1)
}

// get returns the timeline ref of n seqs. The caller must not keep the
// slice past the state's lock, nor change it.
func (t *timelines) get(ref timelineRef, n uint32) []uint64 {
	switch {
	case ref == 0:
		return nil
	case ref&refLongTimeline != 0:
		return t.long[ref&^refLongTimeline][:n]
	}
	start := int(ref - 1)
	return t.chunks[start/timelineChunk][start%timelineChunk:][:n]
}

// addMeeting makes m ses's meeting.
func (s *State) addMeeting(ses *session, m meeting) {
	s.meetings.add(m)
	ses.meeting = uint32(s.meetings.len())
}

// emailIndex finds a tenant's contact by its e-mail's emailKey. It keys
// the contacts by a hash of the key and holds their numbers in the
// state's contacts table: a map from the key strings to the contacts was
// two pointers a contact for the garbage collector to visit at every
// cycle. Two keys of one hash (for a million contacts, about one chance
// in 2^25 that any pair exists) are told apart by the key itself: the
// later one is kept by name in clash.
type emailIndex struct {
	byHash map[uint64]uint32
	clash  map[string]uint32
	hash   func(key string) uint64 // nil: emailHash; tests make keys clash
}

var emailSeed = maphash.MakeSeed()

func emailHash(key string) uint64 { return maphash.String(emailSeed, key) }

func (x *emailIndex) hashOf(key string) uint64 {
	if x.hash != nil {
		return x.hash(key)
	}
	return emailHash(key)
}

// get returns the contact of s whose e-mail's key is key, or nil.
func (x *emailIndex) get(s *State, key string) *contact {
	n, ok := x.byHash[x.hashOf(key)]
	if !ok {
		return nil
	}
	if c := s.contacts.num(n); isKeyOf(key, s.text.str(c.email)) {
		return c
	}
	if n, ok := x.clash[key]; ok {
		return s.contacts.num(n)
	}
	return nil
}

// add indexes contact number n of s, whose e-mail's key is key and not
// yet in x.
func (x *emailIndex) add(s *State, key string, n uint32) {
	h := x.hashOf(key)
	if x.byHash == nil {
		x.byHash = map[uint64]uint32{}
	}
	if m, ok := x.byHash[h]; ok && !isKeyOf(key, s.text.str(s.contacts.num(m).email)) {
		if x.clash == nil {
			x.clash = map[string]uint32{}
		}
		x.clash[key] = n
		return
	}
	x.byHash[h] = n
}

// table keeps values of T in blocks of blockLen, each numbered in the
// order it was added, with an index from ID to that number. The index
// holds numbers, not pointers: a map of a million pointers is a million
// slots the garbage collector visits at every cycle, each a lookup of
// the object it points into. With the sessions' and contacts' indexes
// of pointers, one collection at a million of each took a third longer
// (167 vs 122–126 ms; the GCWithState benchmark's shape). A value never
// moves and is never removed.
type table[T any] struct {
	ids    map[ID]uint32
	blocks [][]T // value n is blocks[n/blockLen][n%blockLen]
	n      uint32
	// newest is the greatest id in t. Ids are minted in time order, so
	// the id a record creates is usually greater, and get says it is not
	// in t without a lookup in ids: creating a value hashes and probes
	// its id once (the insert), not twice. At a million values that
	// probe is a cache miss, which the insert alone now pays. An id that
	// is not greater (applied out of its minting order, minted by a clock
	// behind an earlier one, or one from the future pinning newest) is
	// looked up as before: this only ever costs speed.
	newest ID
}

// addNumbered keeps v as the value of id, which must not be in t, and
// returns where it is kept and its number.
func (t *table[T]) addNumbered(id ID, v T) (*T, uint32) {
	if t.ids == nil {
		t.ids = map[ID]uint32{}
	}
	if t.n%blockLen == 0 {
		t.blocks = append(t.blocks, make([]T, blockLen))
	}
	n := t.n
	p := &t.blocks[n/blockLen][n%blockLen]
	*p = v
	t.ids[id] = n
	if n == 0 || id.Compare(t.newest) > 0 {
		t.newest = id
	}
	t.n++
	return p, n
}

// num returns value number n.
func (t *table[T]) num(n uint32) *T { return &t.blocks[n/blockLen][n%blockLen] }

// get returns the value of id.
func (t *table[T]) get(id ID) (*T, bool) {
	if t.n == 0 || id.Compare(t.newest) > 0 {
		return nil, false
	}
	n, ok := t.ids[id]
	if !ok {
		return nil, false
	}
	return t.num(n), true
}

// at returns the value of id, or nil.
func (t *table[T]) at(id ID) *T {
	p, _ := t.get(id)
	return p
}

// presize makes room in the index for n values.
func (t *table[T]) presize(n int) { t.ids = make(map[ID]uint32, n) }

// len is the number of values in t.
func (t *table[T]) len() int { return int(t.n) }

// list is an append-only list whose growth never copies more than
// listChunk values (and its index of chunks, 24 bytes a chunk). A
// tenant's sessions and contacts and an agent's or contact's sessions
// were slices grown by append: at half a million sessions each growth
// allocated and copied megabytes of pointers inside one write, under the
// state's lock; at 580,609 sessions, while the collector was marking,
// one group's deciding took 69 ms, and every request behind it waited
// (one cause of the black-box POST's p99 spikes, issue 14). A list keeps
// its first listChunk values in head, grown by doubling, and the rest in
// chunks of listChunk, each allocated whole. The encoder of a snapshot reads a list
// only under the state's read lock: add may replace head and *rest.
//
// A copy of a list shares head's spare room and *rest with the original
// (keepAgent keeps one for a snapshot's cut, contactMore's growth moves
// one): only one of them may be added to, or each would write over the
// other's values.
type list[T any] struct {
	head []T
	rest *[][]T // nil until head is full
}

// listChunk is the most values a list's growth copies, and the length of
// its chunks past the first: 1,023 pointers and the allocation's header
// are 8 KiB, where 1,024 took the next size class, 9,472 bytes.
const listChunk = 1023

func (l *list[T]) add(v T) {
	if len(l.head) < listChunk {
		if len(l.head) == cap(l.head) { // grown here, never past listChunk
			grown := make([]T, len(l.head), min(listChunk, max(2, 2*cap(l.head))))
			copy(grown, l.head)
			l.head = grown
		}
		l.head = append(l.head, v)
		return
	}
	if l.rest == nil {
		l.rest = new([][]T)
	}
	r := *l.rest
	if len(r) == 0 || len(r[len(r)-1]) == listChunk {
		r = append(r, make([]T, 0, listChunk))
	}
	r[len(r)-1] = append(r[len(r)-1], v)
	*l.rest = r
}

func (l *list[T]) len() int {
	n := len(l.head)
	if l.rest != nil && len(*l.rest) > 0 {
		r := *l.rest
		n += (len(r)-1)*listChunk + len(r[len(r)-1])
	}
	return n
}

// at returns value i, which must be below len.
func (l *list[T]) at(i int) T {
	if i < len(l.head) {
		return l.head[i]
	}
	i -= listChunk
	return (*l.rest)[i/listChunk][i%listChunk]
}

// ptr returns where value i, which must be below len, is kept until the
// next add.
func (l *list[T]) ptr(i int) *T {
	if i < len(l.head) {
		return &l.head[i]
	}
	i -= listChunk
	return &(*l.rest)[i/listChunk][i%listChunk]
}

// all yields the values in order.
func (l *list[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, v := range l.head {
			if !yield(v) {
				return
			}
		}
		if l.rest == nil {
			return
		}
		for _, c := range *l.rest {
			for _, v := range c {
				if !yield(v) {
					return
				}
			}
		}
	}
}

// ordered is a tenant's list of one kind of entity, in seq order: a list,
// or a slice (as a plain one).
type ordered[T any] interface {
	len() int
	at(i int) T
}

// slice is a slice as an ordered list; pass a pointer to it, which an
// interface holds without an allocation.
type slice[T any] []T

func (l *slice[T]) len() int   { return len(*l) }
func (l *slice[T]) at(i int) T { return (*l)[i] }
