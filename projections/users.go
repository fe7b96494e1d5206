package projections

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"demosvc/eventlog"
)

// Dashboard users: commands and reads. Secrets never reach the log in
// plaintext: setup links and session tokens are random 32-byte values kept
// as their SHA-256; passwords as argon2id hashes sealed under the master
// key. Argon2 runs before a command reaches the writer, never inside it.

// SetupLinkTTL is how long a setup link stays valid.
const SetupLinkTTL = 24 * time.Hour

// tokenBytes is the entropy of a setup link or a session token.
const tokenBytes = 32

// SetupLink is a freshly issued one-time link's token: the only time it
// exists outside the person it is given to.
type SetupLink struct {
	Token     string    `json:"token"`
	UserID    string    `json:"user_id,omitempty"` // "" for an account's first admin
	AccountID string    `json:"account_id"`
	ExpiresAt Timestamp `json:"expires_at"`
}

// Path is the dashboard path of the link.
func (l SetupLink) Path() string { return "/setup/" + l.Token }

// SetupTarget is what a valid setup link is for.
type SetupTarget struct {
	AccountID string
	User      *User // nil for an account's first admin
}

// SessionInfo is a live dashboard session.
type SessionInfo struct {
	User       User
	SignedInAt time.Time
	ExpiresAt  time.Time
}

// ErrBadCredentials is the one answer to a failed sign-in, whatever failed.
var ErrBadCredentials = errors.New("wrong e-mail or password")

// TokenHash returns the SHA-256 of a token, as the log keeps it.
func TokenHash(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

func (p *Projections) newToken() (token, hexHash string) {
	token = base64.RawURLEncoding.EncodeToString(p.log.IDs().Random(tokenBytes))
	h := TokenHash(token)
	return token, hex.EncodeToString(h[:])
}

func stampOf(t time.Time) string { return t.UTC().Format(timeFormat) }

// CreateUser creates a user of accountID with no password and returns the
// one-time link, valid until now+SetupLinkTTL, where they set it.
func (p *Projections) CreateUser(ctx context.Context, actor, accountID, email, role string, now time.Time) (User, SetupLink, error) {
	if err := checkEmail("email", email); err != nil {
		return User{}, SetupLink{}, err
	}
	if err := checkRole(role); err != nil {
		return User{}, SetupLink{}, err
	}
	id := p.log.IDs().New(PrefixUser)
	token, hash := p.newToken()
	exp := now.Add(SetupLinkTTL).UTC().Truncate(time.Second)
	v, err := p.Do(ctx, Command{
		Account: accountID, Actor: actor,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			if s.accounts[accountID] == nil {
				return nil, nil, ParamErrorf(ENotFound, "account", "no account %q", accountID)
			}
			if s.users.byEmail[emailKey(email)] != nil {
				return nil, nil, ParamErrorf(EInvalid, "email", "a user with this e-mail exists")
			}
			return []any{&UserCreated{UserID: id, Email: email, Role: role},
				&UserSetupIssued{UserID: id, TokenHash: hash, ExpiresAt: stampOf(exp)}}, nil, nil
		},
		Result: func(s *State) any { return s.users.byID[id].User },
	})
	if err != nil {
		return User{}, SetupLink{}, err
	}
	return v.(User), SetupLink{Token: token, UserID: id, AccountID: accountID, ExpiresAt: Timestamp(exp)}, nil
}

// IssueSetupLink issues a new one-time link for userID, replacing the
// older ones: how a password is reset. userID "" issues the link of
// accountID's first admin, refused once the account has a user.
func (p *Projections) IssueSetupLink(ctx context.Context, actor, accountID, userID string, now time.Time) (SetupLink, error) {
	token, hash := p.newToken()
	exp := now.Add(SetupLinkTTL).UTC().Truncate(time.Second)
	if userID != "" {
		p.View(func(s *State) {
			if u := s.users.byID[userID]; u != nil {
				accountID = u.AccountID
			}
		})
	}
	_, err := p.Do(ctx, Command{
		Account: accountID, Actor: actor,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			if userID == "" {
				if s.accounts[accountID] == nil {
					return nil, nil, ParamErrorf(ENotFound, "account", "no account %q", accountID)
				}
				if s.hasUsers(accountID) {
					return nil, nil, Errorf(EInvalidState, "account %s has users; reset one's password instead", accountID)
				}
			} else {
				u := s.users.byID[userID]
				if u == nil || u.AccountID != accountID {
					return nil, nil, ParamErrorf(ENotFound, "user", "no user %q", userID)
				}
				if u.Disabled {
					return nil, nil, Errorf(EInvalidState, "user %s is disabled", userID)
				}
			}
			return []any{&UserSetupIssued{UserID: userID, TokenHash: hash, ExpiresAt: stampOf(exp)}}, nil, nil
		},
	})
	if err != nil {
		return SetupLink{}, err
	}
	return SetupLink{Token: token, UserID: userID, AccountID: accountID, ExpiresAt: Timestamp(exp)}, nil
}

// findLink returns the outstanding link of token at now.
func (s *State) findLink(token string, now time.Time) *setupLink {
	s.users.init()
	l := s.users.links[TokenHash(token)]
	if l == nil || l.expiresAt <= now.Unix() {
		return nil
	}
	if l.userID != "" {
		if u := s.users.byID[l.userID]; u == nil || u.Disabled {
			return nil
		}
	} else if s.hasUsers(l.account) {
		// A first admin's link ends when the account gets a user by
		// another way (demosvc users create): serve printed it, and its
		// line may sit in a journal others can read.
		return nil
	}
	return l
}

// hasUsers reports whether accountID has a user.
func (s *State) hasUsers(accountID string) bool {
	for _, u := range s.users.order {
		if u.AccountID == accountID {
			return true
		}
	}
	return false
}

// Setup returns what token's link is for; false for an unknown, used or
// expired link.
func (p *Projections) Setup(token string, now time.Time) (SetupTarget, bool) {
	var t SetupTarget
	var ok bool
	p.View(func(s *State) {
		l := s.findLink(token, now)
		if l == nil {
			return
		}
		t.AccountID, ok = l.account, true
		if l.userID != "" {
			u := s.users.byID[l.userID].User
			t.User = &u
		}
	})
	return t, ok
}

// ClientInfo is what a session records of the browser that opened it.
type ClientInfo struct {
	Addr      string
	UserAgent string
}

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD") // a header may hold any bytes; the log holds UTF-8
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // not a rune cut in two
	}
	return s[:n]
}

// CompleteSetup uses a setup link: it creates the first admin (with email,
// for a first-admin link; email is ignored otherwise), sets the password
// and opens a session that ends at now+maxAge at the latest. It returns
// the user and the new session's token.
func (p *Projections) CompleteSetup(ctx context.Context, token, email, password string, client ClientInfo, now time.Time, maxAge time.Duration) (User, string, error) {
	if err := CheckPassword(password); err != nil {
		return User{}, "", err
	}
	target, ok := p.Setup(token, now)
	if !ok {
		return User{}, "", Errorf(ENotFound, "this setup link is unknown, used or expired")
	}
	var userID string
	if target.User == nil {
		if err := checkEmail("email", email); err != nil {
			return User{}, "", err
		}
		userID = p.log.IDs().New(PrefixUser)
	} else {
		userID = target.User.ID
	}
	if p.opts.Sealer == nil {
		return User{}, "", errors.New("no master key to seal the password hash with")
	}
	phc, err := HashPassword(ctx, password, p.log.IDs().Reader())
	if err != nil {
		return User{}, "", err
	}
	sealed, err := p.opts.Sealer.Seal([]byte(phc))
	if err != nil {
		return User{}, "", err
	}
	sessToken, sessHash := p.newToken()
	linkHash := TokenHash(token)
	v, err := p.Do(ctx, Command{
		Account: target.AccountID, Actor: userID,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			l := s.findLink(token, now)
			if l == nil || l.account != target.AccountID || (l.userID != "" && l.userID != userID) {
				return nil, nil, Errorf(ENotFound, "this setup link is unknown, used or expired")
			}
			var evs []any
			if l.userID == "" {
				if s.users.byEmail[emailKey(email)] != nil {
					return nil, nil, ParamErrorf(EInvalid, "email", "a user with this e-mail exists")
				}
				evs = append(evs, &UserCreated{UserID: userID, Email: email, Role: RoleAdmin})
			}
			evs = append(evs,
				&UserPasswordSet{UserID: userID, SetupHash: hex.EncodeToString(linkHash[:]), PasswordHash: sealed},
				&UserSignedIn{UserID: userID, TokenHash: sessHash, ClientAddr: clip(client.Addr, 100),
					UserAgent: clip(client.UserAgent, 300), ExpiresAt: stampOf(now.Add(maxAge))})
			return evs, nil, nil
		},
		Result: func(s *State) any { return s.users.byID[userID].User },
	})
	if err != nil {
		return User{}, "", err
	}
	return v.(User), sessToken, nil
}

// dummyHash is verified against when no user has the e-mail, so that an
// unknown e-mail takes as long as a wrong password.
var dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" +
	"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// SignIn checks email and password and opens a session that ends at
// now+maxAge at the latest. Every failure is ErrBadCredentials: an
// unknown e-mail, a disabled user, a user without a password and a wrong
// password look alike.
func (p *Projections) SignIn(ctx context.Context, email, password string, client ClientInfo, now time.Time, maxAge time.Duration) (User, string, error) {
	var u User
	var sealed eventlog.Sealed
	p.View(func(s *State) {
		if r := s.users.byEmail[emailKey(email)]; r != nil {
			u, sealed = r.User, r.password
		}
	})
	phc := dummyHash
	if len(sealed) > 0 && p.opts.Sealer != nil {
		if b, err := p.opts.Sealer.Open(sealed); err == nil {
			phc = string(b)
		}
	}
	ok, err := VerifyPassword(ctx, phc, password)
	if err != nil {
		return User{}, "", err
	}
	if !ok || u.ID == "" || u.Disabled || len(sealed) == 0 {
		return User{}, "", ErrBadCredentials
	}
	token, hash := p.newToken()
	_, err = p.Do(ctx, Command{
		Account: u.AccountID, Actor: u.ID,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			r := s.users.byID[u.ID]
			// The password may have changed, or the user been disabled,
			// while argon2 ran.
			if r == nil || r.Disabled || !bytes.Equal(r.password, sealed) {
				return nil, nil, ErrBadCredentials
			}
			return []any{&UserSignedIn{UserID: u.ID, TokenHash: hash, ClientAddr: clip(client.Addr, 100),
				UserAgent: clip(client.UserAgent, 300), ExpiresAt: stampOf(now.Add(maxAge))}}, nil, nil
		},
	})
	if err != nil {
		return User{}, "", err
	}
	return u, token, nil
}

// UnavailablePasswords returns the ids of the users, not disabled, whose
// password does not open under this process's master key (a data dir
// restored without its master.key): they cannot sign in until a new
// setup link (`demosvc users reset-password`) sets another, or the master key
// they were sealed with is brought back.
func (p *Projections) UnavailablePasswords() []string {
	if p.opts.Sealer == nil {
		return nil
	}
	type user struct {
		id       string
		password eventlog.Sealed // replaced, never changed in place
	}
	var sealed []user
	p.View(func(s *State) {
		for _, r := range s.users.order {
			if len(r.password) > 0 && !r.Disabled {
				sealed = append(sealed, user{r.ID, r.password})
			}
		}
	})
	var out []string
	for _, u := range sealed { // outside the lock: an AES-GCM open each
		if _, err := p.opts.Sealer.Open(u.password); err != nil {
			out = append(out, u.id)
		}
	}
	return out
}

// Session returns the live session of token at now: false for an unknown,
// signed-out or expired one, or one of a disabled user.
func (p *Projections) Session(token string, now time.Time) (SessionInfo, bool) {
	var out SessionInfo
	var ok bool
	p.View(func(s *State) {
		ses := s.users.sessions[TokenHash(token)]
		if ses == nil || ses.expiresAt <= now.Unix() {
			return
		}
		u := s.users.byID[ses.userID]
		if u == nil || u.Disabled {
			return
		}
		out = SessionInfo{User: u.User, SignedInAt: time.Unix(ses.signedInAt, 0), ExpiresAt: time.Unix(ses.expiresAt, 0)}
		ok = true
	})
	return out, ok
}

// SignOut ends the session of token; an unknown one changes nothing.
func (p *Projections) SignOut(ctx context.Context, token string) error {
	h := TokenHash(token)
	var userID, account string
	p.View(func(s *State) {
		if ses := s.users.sessions[h]; ses != nil {
			userID = ses.userID
			account = s.users.byID[userID].AccountID
		}
	})
	if userID == "" {
		return nil
	}
	_, err := p.Do(ctx, Command{
		Account: account, Actor: userID,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			if ses := s.users.sessions[h]; ses == nil || ses.userID != userID {
				return nil, nil, nil
			}
			return []any{&UserSignedOut{UserID: userID, TokenHash: hex.EncodeToString(h[:])}}, nil, nil
		},
	})
	return err
}

// DisableUser disables userID for good and ends their sessions. account,
// when not "", must be the user's: a user of another account is not
// found.
func (p *Projections) DisableUser(ctx context.Context, actor, account, userID string) (User, error) {
	if account == "" {
		p.View(func(s *State) {
			if u := s.users.byID[userID]; u != nil {
				account = u.AccountID
			}
		})
	}
	v, err := p.Do(ctx, Command{
		Account: account, Actor: actor,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			u := s.users.byID[userID]
			if u == nil || u.AccountID != account {
				return nil, nil, ParamErrorf(ENotFound, "user", "no user %q", userID)
			}
			if u.Disabled {
				return nil, nil, Errorf(EInvalidState, "user %s is already disabled", userID)
			}
			return []any{&UserDisabled{UserID: userID}}, nil, nil
		},
		Result: func(s *State) any { return s.users.byID[userID].User },
	})
	if err != nil {
		return User{}, err
	}
	return v.(User), nil
}

// Users returns the users of account (every user when ""), oldest first.
func (p *Projections) Users(account string) []User {
	out := []User{}
	p.View(func(s *State) {
		for _, u := range s.users.order {
			if account == "" || u.AccountID == account {
				out = append(out, u.User)
			}
		}
	})
	return out
}

// UserByID returns one user.
func (p *Projections) UserByID(id string) (User, bool) {
	var u User
	var ok bool
	p.View(func(s *State) {
		if r := s.users.byID[id]; r != nil {
			u, ok = r.User, true
		}
	})
	return u, ok
}

// AccountByID returns one account.
func (p *Projections) AccountByID(id string) (Account, bool) {
	var a Account
	var ok bool
	p.View(func(s *State) {
		if acc := s.accounts[id]; acc != nil {
			a, ok = *acc, true
		}
	})
	return a, ok
}
