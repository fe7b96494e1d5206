package projections

import (
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"demosvc/eventlog"
)

// PrefixUser starts every dashboard user's id.
const PrefixUser = "usr_"

// User is a dashboard user as the state keeps it, without the password
// hash, which only CheckPassword reads.
type User struct {
	ID          string    `json:"id"`
	AccountID   string    `json:"account_id"`
	Email       string    `json:"email"`
	Role        string    `json:"role"`
	CreatedAt   Timestamp `json:"created_at"`
	HasPassword bool      `json:"has_password"`
	Disabled    bool      `json:"disabled"`
}

type userRec struct {
	User
	password eventlog.Sealed
	// sessions are the hashes of the user's sessions, in no order; some
	// may have ended since (signed out or expired), and are dropped when
	// the list is next trimmed (see addSession).
	sessions [][sha256.Size]byte
}

type setupLink struct {
	account   string
	userID    string // "" for an account's first admin
	expiresAt int64
	seq       uint64 // of the user.setup_issued, for a stable order
}

type userSession struct {
	userID     string
	signedInAt int64
	expiresAt  int64
	clientAddr string
	userAgent  string
}

// userState is the users' part of the state.
type userState struct {
	byID     map[string]*userRec
	byEmail  map[string]*userRec // by emailKey: e-mails are unique service-wide, sign-in takes no account
	order    []*userRec          // creation order
	links    map[[sha256.Size]byte]*setupLink
	sessions map[[sha256.Size]byte]*userSession
	expiries expiryHeap // every session's expiry, soonest first (see pruneSessions)
}

// sessionExpiry is a session's expiry, as a sign-in set it.
type sessionExpiry struct {
	at int64
	h  [sha256.Size]byte
}

// expiryHeap is a container/heap of sessionExpiry, soonest first.
type expiryHeap []sessionExpiry

func (e expiryHeap) Len() int           { return len(e) }
func (e expiryHeap) Less(i, j int) bool { return e[i].at < e[j].at }
func (e expiryHeap) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *expiryHeap) Push(x any)        { *e = append(*e, x.(sessionExpiry)) }
func (e *expiryHeap) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// maxSessionsPerUser bounds a user's live sessions: past it, a sign-in
// ends the user's oldest session. Each sign-in is a password check, but a
// user signing in again and again (100 times a minute the e-mail's limit
// allows) would otherwise keep a week's worth, a million sessions.
const maxSessionsPerUser = 100

// addSession keeps ses under h, and its expiry. A user past
// maxSessionsPerUser loses the session signed in first (the least hash
// among those of the same second), chosen from what a snapshot keeps, so
// that a state read from one decides as a replay would.
func (u *userState) addSession(h [sha256.Size]byte, ses *userSession) {
	if old := u.sessions[h]; old != nil && old.userID == ses.userID {
		u.sessions[h] = ses
		heap.Push(&u.expiries, sessionExpiry{at: ses.expiresAt, h: h})
		return // on its user's list already
	}
	u.sessions[h] = ses
	heap.Push(&u.expiries, sessionExpiry{at: ses.expiresAt, h: h})
	r := u.byID[ses.userID]
	if r == nil {
		return
	}
	r.sessions = append(r.sessions, h)
	if len(r.sessions) <= maxSessionsPerUser {
		return
	}
	live := r.sessions[:0]
	for _, x := range r.sessions {
		if s := u.sessions[x]; s != nil && s.userID == r.ID {
			live = append(live, x)
		}
	}
	clear(r.sessions[len(live):])
	r.sessions = live
	for len(r.sessions) > maxSessionsPerUser {
		oldest := 0
		for i, x := range r.sessions {
			a, b := u.sessions[x], u.sessions[r.sessions[oldest]]
			if a.signedInAt < b.signedInAt || a.signedInAt == b.signedInAt && compareHash(x, r.sessions[oldest]) < 0 {
				oldest = i
			}
		}
		delete(u.sessions, r.sessions[oldest])
		r.sessions = slices.Delete(r.sessions, oldest, oldest+1)
	}
}

// pruneSessions removes every session expired at now, which keeps the map
// bounded by the live sessions: the same sessions a scan of the whole map
// would remove, found in O(log n) each. An expiry whose session has since
// ended, or been signed in again with another expiry, is dropped as it
// comes up.
func (u *userState) pruneSessions(now int64) {
	for len(u.expiries) > 0 && u.expiries[0].at <= now {
		e := heap.Pop(&u.expiries).(sessionExpiry)
		if ses := u.sessions[e.h]; ses != nil && ses.expiresAt <= now {
			delete(u.sessions, e.h)
		}
	}
}

func (u *userState) init() {
	if u.byID == nil {
		u.byID = map[string]*userRec{}
		u.byEmail = map[string]*userRec{}
		u.links = map[[sha256.Size]byte]*setupLink{}
		u.sessions = map[[sha256.Size]byte]*userSession{}
	}
}

func hashOf(hexSum string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	b, err := hex.DecodeString(hexSum)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("%q is not a hex SHA-256", hexSum)
	}
	copy(h[:], b)
	return h, nil
}

func parseStamp(v string) (int64, error) {
	t, err := time.Parse(timeFormat, v)
	if err != nil {
		return 0, err
	}
	return t.Unix(), nil
}

func (s *State) userOf(rec *eventlog.Record, id string) (*userRec, error) {
	u := s.users.byID[id]
	if u == nil || u.AccountID != rec.Account {
		return nil, errorf("unknown user %s in account %s", id, rec.Account)
	}
	return u, nil
}

// endSessions ends every session of userID.
func (u *userState) endSessions(userID string) {
	r := u.byID[userID]
	if r == nil {
		return
	}
	for _, h := range r.sessions {
		if ses := u.sessions[h]; ses != nil && ses.userID == userID {
			delete(u.sessions, h)
		}
	}
	r.sessions = nil
}

func (s *State) applyUserCreated(rec *eventlog.Record, p *UserCreated) error {
	if s.accounts[rec.Account] == nil {
		return errorf("user %s for unknown account %q", p.UserID, rec.Account)
	}
	if s.users.byID[p.UserID] != nil {
		return errorf("user %s exists", p.UserID)
	}
	if s.users.byEmail[emailKey(p.Email)] != nil {
		return errorf("a user with e-mail %q exists", p.Email)
	}
	u := &userRec{User: User{ID: p.UserID, AccountID: rec.Account, Email: p.Email, Role: p.Role, CreatedAt: Timestamp(rec.Time)}}
	s.users.byID[u.ID] = u
	s.users.byEmail[emailKey(u.Email)] = u
	s.users.order = append(s.users.order, u)
	return nil
}

func (s *State) applyUserSetupIssued(rec *eventlog.Record, p *UserSetupIssued) error {
	if s.accounts[rec.Account] == nil {
		return errorf("setup link for unknown account %q", rec.Account)
	}
	if p.UserID != "" {
		if _, err := s.userOf(rec, p.UserID); err != nil {
			return err
		}
	}
	h, err := hashOf(p.TokenHash)
	if err != nil {
		return err
	}
	exp, err := parseStamp(p.ExpiresAt)
	if err != nil {
		return err
	}
	now := unix(rec.Time)
	for k, l := range s.users.links {
		// A new link replaces the user's older ones (or the account's
		// older first-admin links); expired ones go too.
		if l.expiresAt <= now || (l.account == rec.Account && l.userID == p.UserID) {
			delete(s.users.links, k)
		}
	}
	s.users.links[h] = &setupLink{account: rec.Account, userID: p.UserID, expiresAt: exp, seq: rec.Seq}
	return nil
}

func (s *State) applyUserPasswordSet(rec *eventlog.Record, p *UserPasswordSet) error {
	u, err := s.userOf(rec, p.UserID)
	if err != nil {
		return err
	}
	h, err := hashOf(p.SetupHash)
	if err != nil {
		return err
	}
	l := s.users.links[h]
	if l == nil || l.account != rec.Account || (l.userID != "" && l.userID != u.ID) {
		return errorf("setup link of user %s is not outstanding", u.ID)
	}
	delete(s.users.links, h)
	u.password = append(eventlog.Sealed(nil), p.PasswordHash...)
	u.HasPassword = true
	s.users.endSessions(u.ID)
	return nil
}

func (s *State) applyUserSignedIn(rec *eventlog.Record, p *UserSignedIn) error {
	u, err := s.userOf(rec, p.UserID)
	if err != nil {
		return err
	}
	if u.Disabled {
		return errorf("user %s is disabled", u.ID)
	}
	h, err := hashOf(p.TokenHash)
	if err != nil {
		return err
	}
	exp, err := parseStamp(p.ExpiresAt)
	if err != nil {
		return err
	}
	now := unix(rec.Time)
	s.users.pruneSessions(now)
	s.users.addSession(h, &userSession{userID: u.ID, signedInAt: now, expiresAt: exp, clientAddr: p.ClientAddr, userAgent: p.UserAgent})
	return nil
}

func (s *State) applyUserSignedOut(rec *eventlog.Record, p *UserSignedOut) error {
	if _, err := s.userOf(rec, p.UserID); err != nil {
		return err
	}
	h, err := hashOf(p.TokenHash)
	if err != nil {
		return err
	}
	if ses := s.users.sessions[h]; ses != nil && ses.userID == p.UserID {
		delete(s.users.sessions, h)
	}
	return nil
}

func (s *State) applyUserDisabled(rec *eventlog.Record, p *UserDisabled) error {
	u, err := s.userOf(rec, p.UserID)
	if err != nil {
		return err
	}
	u.Disabled = true
	s.users.endSessions(u.ID)
	for k, l := range s.users.links {
		if l.userID == u.ID {
			delete(s.users.links, k)
		}
	}
	return nil
}
