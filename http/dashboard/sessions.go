package dashboard

import (
	"crypto/sha256"
	"sync"
	"time"

	"demosvc/projections"
)

// Sessions is the dashboard's session store. Invariant: a session is live
// only while the log says it is (signed in, not signed out, its user not
// disabled, its password not set since) and it is younger than its
// absolute maximum age (fixed in the log at sign-in) and it was used within
// the idle timeout. The log holds only the SHA-256 of each token. Last use
// is kept in memory, as writing an event per request would make every page
// view a write, and in the signed use cookie (auth.go), which tells it to a
// node that did not see it (a restart, another node of a cluster); without
// that cookie a session's last use counts from its sign-in, so a lost
// cookie or a restart can only shorten sessions, never extend them.
type Sessions struct {
	state *projections.Projections
	clock func() time.Time
	idle  time.Duration
	max   time.Duration

	mu       sync.Mutex
	lastSeen map[[sha256.Size]byte]time.Time
}

// NewSessions returns a store over state reading clock, with the given
// idle timeout and absolute maximum age.
func NewSessions(state *projections.Projections, clock func() time.Time, idle, max time.Duration) *Sessions {
	return &Sessions{state: state, clock: clock, idle: idle, max: max, lastSeen: map[[sha256.Size]byte]time.Time{}}
}

// MaxAge is the absolute lifetime of a new session.
func (s *Sessions) MaxAge() time.Duration { return s.max }

// Now is the store's clock.
func (s *Sessions) Now() time.Time { return s.clock() }

// Lookup returns the live session of token and counts this as its use;
// false for a session that is not live (see the invariant). used is a
// last use another node saw (the zero time when none is known), which
// counts as one this store saw.
func (s *Sessions) Lookup(token string, used time.Time) (projections.SessionInfo, bool) {
	if token == "" {
		return projections.SessionInfo{}, false
	}
	now := s.clock()
	info, ok := s.state.Session(token, now)
	h := projections.TokenHash(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	// The expiry the log holds is the maximum age at sign-in; the one in
	// force now applies too, so that lowering dashboard.session_max
	// shortens the sessions already open (a restart never lengthens one).
	if !ok || now.Sub(info.SignedInAt) >= s.max {
		delete(s.lastSeen, h)
		return projections.SessionInfo{}, false
	}
	last, seen := s.lastSeen[h]
	if !seen || last.Before(info.SignedInAt) {
		last = info.SignedInAt
	}
	if used.After(now) {
		used = now // another node's clock runs ahead of this one's
	}
	if used.After(last) {
		last = used
	}
	if now.Sub(last) >= s.idle {
		delete(s.lastSeen, h)
		return projections.SessionInfo{}, false
	}
	s.lastSeen[h] = now
	if len(s.lastSeen) > 1024 {
		s.sweep(now)
	}
	return info, true
}

// Forget drops what the store keeps of token after a sign-out.
func (s *Sessions) Forget(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.lastSeen, projections.TokenHash(token))
}

// sweep drops last uses older than the idle timeout: those sessions are
// over whatever the log says. Callers hold mu.
func (s *Sessions) sweep(now time.Time) {
	for h, t := range s.lastSeen {
		if now.Sub(t) >= s.idle {
			delete(s.lastSeen, h)
		}
	}
}
