package projections

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"demosvc/eventlog"
)

// Plans.
const (
	PlanStarter    = "starter"
	PlanPro        = "pro"
	PlanEnterprise = "enterprise"
)

// KeyPrefix starts every API key.
const KeyPrefix = "sk_"

// keyRandomBytes is the entropy of an API key.
const keyRandomBytes = 32

// KeyLen is the length of every API key: the prefix and 43 base64url
// characters.
var KeyLen = len(KeyPrefix) + base64.RawURLEncoding.EncodedLen(keyRandomBytes)

// maxRPM bounds an enterprise account's own rate limit.
const maxRPM = 1_000_000

// NewKey is a freshly created API key: the only time the key itself exists
// outside the client.
type NewKey struct {
	APIKey
	Key string `json:"key"`
}

// Principal is who an authenticated request acts for.
type Principal struct {
	Account Account
	// KeyID is who the events are recorded as caused by: the API key's
	// id, or the signed-in dashboard user's id (usr_…).
	KeyID string
}

// CheckAccountInput validates the fields of a new account.
func CheckAccountInput(name, plan string, rpm int) error {
	if err := checkText("name", name, 1, 200); err != nil {
		return err
	}
	switch plan {
	case PlanStarter, PlanPro:
		if rpm != 0 {
			return ParamErrorf(EInvalid, "rate_limit_per_minute", "only an enterprise account has its own rate limit; %s takes it from config", plan)
		}
	case PlanEnterprise:
		if rpm < 0 || rpm > maxRPM {
			return ParamErrorf(EInvalid, "rate_limit_per_minute", "must be 0 (unlimited) to %d", maxRPM)
		}
	default:
		return ParamErrorf(EInvalid, "plan", "must be one of starter, pro, enterprise; got %q", plan)
	}
	return nil
}

// CreateAccount opens an account.
func (p *Projections) CreateAccount(ctx context.Context, actor, name, plan string, rpm int) (Account, error) {
	name = TrimText(name)
	if err := CheckAccountInput(name, plan, rpm); err != nil {
		return Account{}, err
	}
	id := p.log.IDs().New("acc_")
	v, err := p.Do(ctx, Command{
		Account: id, Actor: actor,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			return []any{&AccountCreated{AccountID: id, Name: name, Plan: plan, RateLimitPerMinute: rpm}}, nil, nil
		},
		Result: func(s *State) any { return *s.accounts[id] },
	})
	if err != nil {
		return Account{}, err
	}
	return v.(Account), nil
}

// mintKey draws a new key and the event that records its hash.
func (p *Projections) mintKey() (key string, ev *APIKeyCreated) {
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(p.log.IDs().Random(keyRandomBytes))
	sum := sha256.Sum256([]byte(key))
	return key, &APIKeyCreated{KeyID: p.log.IDs().New("key_"), KeyHash: hex.EncodeToString(sum[:]), Last4: key[len(key)-4:]}
}

// CreateKey creates an API key for account. The key is in the result only;
// the log holds its SHA-256.
func (p *Projections) CreateKey(ctx context.Context, actor, accountID string) (NewKey, error) {
	key, ev := p.mintKey()
	v, err := p.Do(ctx, Command{
		Account: accountID, Actor: actor,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			if s.accounts[accountID] == nil {
				return nil, nil, ParamErrorf(ENotFound, "account", "no account %q", accountID)
			}
			return []any{ev}, nil, nil
		},
		Result: func(s *State) any { return NewKey{APIKey: *s.keys[ev.KeyID], Key: key} },
	})
	if err != nil {
		return NewKey{}, err
	}
	return v.(NewKey), nil
}

// RevokeKey revokes a key; it is refused from the moment this returns.
func (p *Projections) RevokeKey(ctx context.Context, actor, keyID string) (APIKey, error) {
	var account string
	p.View(func(s *State) {
		if k := s.keys[keyID]; k != nil {
			account = k.AccountID
		}
	})
	v, err := p.Do(ctx, Command{
		Account: account, Actor: actor,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			k := s.keys[keyID]
			if k == nil {
				return nil, nil, ParamErrorf(ENotFound, "key", "no key %q", keyID)
			}
			if k.RevokedAt != nil {
				return nil, nil, Errorf(EInvalidState, "key %s was revoked at %s", keyID, k.RevokedAt)
			}
			return []any{&APIKeyRevoked{KeyID: keyID}}, nil, nil
		},
		Result: func(s *State) any { return *s.keys[keyID] },
	})
	if err != nil {
		return APIKey{}, err
	}
	return v.(APIKey), nil
}

// Bootstrap creates account "default" on plan with one key when the log
// has no account. created is false, and nothing is written, otherwise.
func (p *Projections) Bootstrap(ctx context.Context, plan string) (acc Account, key NewKey, created bool, err error) {
	id := p.log.IDs().New("acc_")
	plain, ev := p.mintKey()
	v, err := p.Do(ctx, Command{
		Account: id, Actor: "cli",
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			if len(s.accounts) > 0 {
				return nil, nil, nil
			}
			return []any{&AccountCreated{AccountID: id, Name: "default", Plan: plan}, ev}, nil, nil
		},
		Result: func(s *State) any {
			if k := s.keys[ev.KeyID]; k != nil {
				return NewKey{APIKey: *k, Key: plain}
			}
			return nil
		},
	})
	if err != nil || v == nil {
		return Account{}, NewKey{}, false, err
	}
	key = v.(NewKey)
	p.View(func(s *State) { acc = *s.accounts[id] })
	return acc, key, true, nil
}

// Authenticate returns who key acts for. It is false for a key of the wrong
// shape, an unknown key and a revoked key alike. The lookup is by the
// SHA-256 of the presented key, so its timing depends on that hash, not on
// how much of a real key was guessed.
func (p *Projections) Authenticate(key string) (Principal, bool) {
	if len(key) != KeyLen || !strings.HasPrefix(key, KeyPrefix) {
		return Principal{}, false
	}
	// Hashed from the stack: []byte(key) is an allocation per request.
	var b [64]byte
	pr, ok := (*p.auth.Load())[sha256.Sum256(append(b[:0], key...))]
	return pr, ok
}

// Accounts returns every account, oldest first.
func (p *Projections) Accounts() []Account {
	var out []Account
	p.View(func(s *State) {
		out = make([]Account, len(s.accountOrder))
		for i, a := range s.accountOrder {
			out[i] = *a
		}
	})
	return out
}

// Keys returns the keys of accountID (every key when empty), oldest first.
func (p *Projections) Keys(accountID string) []APIKey {
	out := []APIKey{}
	p.View(func(s *State) {
		for _, k := range s.keyOrder {
			if accountID == "" || k.AccountID == accountID {
				out = append(out, *k)
			}
		}
	})
	return out
}

// timeFormat is the API's timestamp format: RFC 3339, UTC, whole seconds.
const timeFormat = "2006-01-02T15:04:05Z"
