package projections

import "strings"

// A million sessions with their contacts were seven and a half million
// small objects: each session, contact, contact's list of sessions and
// session's list of events one, and each name, e-mail, company and
// replay URL another. The garbage collector finds and marks every object
// on its own at every cycle, so with a large state the cycles that every
// write's garbage brings cost more and more: GC marking went from 15% to
// 27% of the server's CPU as a benchmark's state grew to a million
// sessions (issue 14). The state now takes these values from shared
// blocks: a million sessions are about twenty thousand of them. Nothing a
// block holds is ever removed from the state, so no block holds memory
// that is no longer used, but for the text of a replay URL or a
// meeting changed later.

// blockLen is the number of values in one block.
const blockLen = 256

// block hands out values from shared blocks of blockLen.
type block[T any] struct{ free []T }

// slice returns an empty slice of capacity n (at most blockLen) in a
// block: an append past n moves it to an array of its own.
func (b *block[T]) slice(n int) []T {
	if len(b.free) < n {
		b.free = make([]T, blockLen)
	}
	s := b.free[:0:n]
	b.free = b.free[n:]
	return s
}

// new returns a pointer to v's copy in a block.
func (b *block[T]) new(v T) *T { return &append(b.slice(1), v)[0] }

// textBlockLen is the size of one block of text; longer strings are kept
// as they are, objects of their own.
const textBlockLen = 32 << 10

// text keeps strings in shared blocks.
type text struct{ b strings.Builder }

// keep returns a copy of s in a block.
func (t *text) keep(s string) string {
	if len(s) == 0 || len(s) > textBlockLen/16 {
		return s
	}
	t.reserve(len(s))
	start := t.b.Len()
	t.b.WriteString(s)
	return t.b.String()[start:]
}

// keepBytes returns p as a string in a block.
func (t *text) keepBytes(p []byte) string {
	if len(p) == 0 || len(p) > textBlockLen/16 {
		return string(p)
	}
	t.reserve(len(p))
	start := t.b.Len()
	t.b.Write(p)
	return t.b.String()[start:]
}

// reserve starts a new block unless n bytes fit in the current one. The
// strings already handed out keep the old block: a Builder only ever
// appends to its buffer, and String returns it without a copy.
func (t *text) reserve(n int) {
	if t.b.Cap()-t.b.Len() < n {
		t.b = strings.Builder{}
		t.b.Grow(textBlockLen)
	}
}

// addContactSession appends ses to c's sessions: most contacts have one.
func (s *State) addContactSession(c *contact, ses *session) {
	if c.sessions == nil {
		c.sessions = s.sessionsBlock.slice(1)
	}
	c.sessions = append(c.sessions, ses)
}

// addEvent appends seq to the session's timeline, which most often ends
// up with two: its progress and its end.
func (s *State) addEvent(ses *session, seq uint64) {
	if ses.events == nil {
		ses.events = s.eventsBlock.slice(2)
	}
	ses.events = append(ses.events, seq)
}

// emailKey is emailKey(email) in a block: email itself when it is its own
// key.
func (s *State) emailKey(email string) string {
	if k := emailKey(email); k != email {
		return s.text.keep(k)
	}
	return email
}
