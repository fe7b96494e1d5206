package projections

import (
	"encoding/hex"
	"strings"
	"time"

	"demosvc/eventlog"
)

// Event types of the dashboard's users. None carries a password, a token
// or a setup link in plaintext: tokens are kept as their SHA-256, password
// hashes sealed under the master key.
const (
	TypeUserCreated     = "user.created"
	TypeUserSetupIssued = "user.setup_issued"
	TypeUserPasswordSet = "user.password_set"
	TypeUserSignedIn    = "user.signed_in"
	TypeUserSignedOut   = "user.signed_out"
	TypeUserDisabled    = "user.disabled"
)

// Roles of a dashboard user.
const (
	RoleAdmin  = "admin"  // everything
	RoleViewer = "viewer" // read only
)

// UserCreated creates a dashboard user of the record's account. The user
// has no password until a setup link is used.
type UserCreated struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Role   string `json:"role"`
}

// UserSetupIssued records a one-time setup link by the SHA-256 of its
// token. UserID "" is the link of an account's first admin, who gives the
// e-mail when using it. A new link of a user replaces the older ones.
type UserSetupIssued struct {
	UserID    string `json:"user_id"`
	TokenHash string `json:"token_hash"` // lowercase hex SHA-256 of the token
	ExpiresAt string `json:"expires_at"` // RFC 3339 UTC
}

// UserPasswordSet sets a user's password through a setup link (which it
// uses up) and ends every session of the user. The argon2id hash is
// sealed under the master key.
type UserPasswordSet struct {
	UserID       string          `json:"user_id"`
	SetupHash    string          `json:"setup_hash"`
	PasswordHash eventlog.Sealed `json:"password_hash"`
}

// UserSignedIn opens a dashboard session, kept by the SHA-256 of its
// cookie's token, until ExpiresAt at the latest.
type UserSignedIn struct {
	UserID     string `json:"user_id"`
	TokenHash  string `json:"token_hash"`
	ClientAddr string `json:"client_addr"`
	UserAgent  string `json:"user_agent"`
	ExpiresAt  string `json:"expires_at"` // RFC 3339 UTC
}

// UserSignedOut ends one session.
type UserSignedOut struct {
	UserID    string `json:"user_id"`
	TokenHash string `json:"token_hash"`
}

// UserDisabled disables a user for good and ends their sessions.
type UserDisabled struct {
	UserID string `json:"user_id"`
}

func registerUserEvents(r *eventlog.Registry) {
	eventlog.Register[UserCreated](r, TypeUserCreated, 1)
	eventlog.Register[UserSetupIssued](r, TypeUserSetupIssued, 1)
	eventlog.Register[UserPasswordSet](r, TypeUserPasswordSet, 1)
	eventlog.Register[UserSignedIn](r, TypeUserSignedIn, 1)
	eventlog.Register[UserSignedOut](r, TypeUserSignedOut, 1)
	eventlog.Register[UserDisabled](r, TypeUserDisabled, 1)
}

func checkUserID(param, v string) error {
	if !strings.HasPrefix(v, PrefixUser) || len(v) <= len(PrefixUser) {
		return ParamErrorf(EInvalid, param, "must be an id starting with %s", PrefixUser)
	}
	return nil
}

func checkRole(v string) error {
	if v != RoleAdmin && v != RoleViewer {
		return ParamErrorf(EInvalid, "role", "must be admin or viewer, got %q", v)
	}
	return nil
}

func checkHash(param, v string) error {
	if b, err := hex.DecodeString(v); err != nil || len(b) != 32 || v != strings.ToLower(v) {
		return ParamErrorf(EInvalid, param, "must be a lowercase hex SHA-256")
	}
	return nil
}

func checkStamp(param, v string) error {
	if _, err := time.Parse(timeFormat, v); err != nil {
		return ParamErrorf(EInvalid, param, "must be an RFC 3339 UTC time such as 2026-01-02T15:04:05Z")
	}
	return nil
}

// Validate checks a user.created payload.
func (p *UserCreated) Validate() error {
	if err := checkUserID("user_id", p.UserID); err != nil {
		return err
	}
	if err := checkEmail("email", p.Email); err != nil {
		return err
	}
	return checkRole(p.Role)
}

// Validate checks a user.setup_issued payload.
func (p *UserSetupIssued) Validate() error {
	if p.UserID != "" {
		if err := checkUserID("user_id", p.UserID); err != nil {
			return err
		}
	}
	if err := checkHash("token_hash", p.TokenHash); err != nil {
		return err
	}
	return checkStamp("expires_at", p.ExpiresAt)
}

// Validate checks a user.password_set payload.
func (p *UserPasswordSet) Validate() error {
	if err := checkUserID("user_id", p.UserID); err != nil {
		return err
	}
	if len(p.PasswordHash) == 0 {
		return ParamErrorf(EInvalid, "password_hash", "must not be empty")
	}
	return checkHash("setup_hash", p.SetupHash)
}

// Validate checks a user.signed_in payload.
func (p *UserSignedIn) Validate() error {
	if err := checkUserID("user_id", p.UserID); err != nil {
		return err
	}
	if err := checkHash("token_hash", p.TokenHash); err != nil {
		return err
	}
	// A sign-in keeps 300 bytes of the user agent (earlier releases up to
	// 900, replacing each byte not UTF-8); the address is the TCP peer's.
	if len(p.UserAgent) > 1024 {
		return ParamErrorf(EInvalid, "user_agent", "must be at most 1024 bytes")
	}
	if len(p.ClientAddr) > 256 {
		return ParamErrorf(EInvalid, "client_addr", "must be at most 256 bytes")
	}
	return checkStamp("expires_at", p.ExpiresAt)
}

// Validate checks a user.signed_out payload.
func (p *UserSignedOut) Validate() error {
	if err := checkUserID("user_id", p.UserID); err != nil {
		return err
	}
	return checkHash("token_hash", p.TokenHash)
}

// Validate checks a user.disabled payload.
func (p *UserDisabled) Validate() error { return checkUserID("user_id", p.UserID) }
