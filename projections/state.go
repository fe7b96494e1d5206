package projections

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"demosvc/eventlog"
)

// State is everything the log says, indexed for reads. It is changed only
// by apply, which reads nothing but the record and its payload.
type State struct {
	seq uint64 // last applied

	accounts     map[string]*Account
	accountOrder []*Account // creation order
	keys         map[string]*APIKey
	keysByHash   map[[sha256.Size]byte]*APIKey
	keyOrder     []*APIKey // creation order

	tenants  map[string]*tenant
	agents   map[ID]*agent
	contacts map[ID]*contact
	sessions map[ID]*session
	webhooks map[string]*webhook
}

// Account is a tenant. Everything else belongs to exactly one account.
type Account struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Plan string `json:"plan"`
	// RateLimitPerMinute is the enterprise plan's own figure (0 =
	// unlimited). Other plans take theirs from config.
	RateLimitPerMinute int       `json:"rate_limit_per_minute"`
	CreatedAt          Timestamp `json:"created_at"`
}

// APIKey is a key as stored: its hash, never the key.
type APIKey struct {
	ID        string            `json:"id"`
	AccountID string            `json:"account_id"`
	Hash      [sha256.Size]byte `json:"-"`
	Last4     string            `json:"last4"`
	CreatedAt Timestamp         `json:"created_at"`
	RevokedAt *Timestamp        `json:"revoked_at"`
}

// Timestamp is a time as the API shows it: RFC 3339, UTC, whole seconds.
// The log keeps full precision.
type Timestamp time.Time

// MarshalJSON renders t as "2006-01-02T15:04:05Z".
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(timeFormat) + `"`), nil
}

func timeOf(t Timestamp) time.Time { return time.Time(t) }

func lower(s string) string { return strings.ToLower(s) }

// String renders t as the API does.
func (t Timestamp) String() string { return time.Time(t).UTC().Format(timeFormat) }

// NewState returns the state of an empty log.
func NewState() *State {
	return &State{
		accounts:   map[string]*Account{},
		keys:       map[string]*APIKey{},
		keysByHash: map[[sha256.Size]byte]*APIKey{},
		tenants:    map[string]*tenant{},
		agents:     map[ID]*agent{},
		contacts:   map[ID]*contact{},
		sessions:   map[ID]*session{},
		webhooks:   map[string]*webhook{},
	}
}

// Seq returns the seq of the last applied event.
func (s *State) Seq() uint64 { return s.seq }

// Checker returns a function that applies each record it is given to s,
// after checking its payload's values: what `log import` uses to refuse a
// record the service could not have written. allowPrivate is
// delivery.allow_private_networks: a webhook URL is held to the rules the
// API applies at registration under the same setting.
func (s *State) Checker(reg *eventlog.Registry, allowPrivate bool) func(rec *eventlog.Record) error {
	return func(rec *eventlog.Record) error {
		payload, err := reg.Decode(rec)
		if err != nil {
			return err
		}
		if v, ok := payload.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("%s: %w", rec.Type, err)
			}
		}
		if w, ok := payload.(*WebhookRegistered); ok && !allowPrivate {
			in := WebhookInput{URL: w.URL, Events: w.Events}
			if err := in.Validate(allowPrivate); err != nil {
				return fmt.Errorf("%s: %w", rec.Type, err)
			}
		}
		return s.apply(rec, payload)
	}
}

// apply advances the state by one record. payload is the record's payload
// decoded at its latest version (a pointer). An error means the log holds
// an event the state cannot take: replay stops there.
func (s *State) apply(rec *eventlog.Record, payload any) error {
	if rec.Seq != s.seq+1 {
		return fmt.Errorf("seq %d applied after %d", rec.Seq, s.seq)
	}
	var err error
	switch p := payload.(type) {
	case *AccountCreated:
		err = s.applyAccountCreated(rec, p)
	case *APIKeyCreated:
		err = s.applyKeyCreated(rec, p)
	case *APIKeyRevoked:
		err = s.applyKeyRevoked(rec, p)
	case *AgentCreated:
		err = s.applyAgentCreated(rec, p)
	case *AgentUpdated:
		err = s.applyAgentUpdated(rec, p)
	case *ContactCreated:
		err = s.applyContactCreated(rec, p)
	case *SessionStarted:
		err = s.applySessionStarted(rec, p)
	case *SessionProgressed:
		err = s.applySessionProgressed(rec, p)
	case *LeadHot:
		err = s.applyLeadHot(rec, p)
	case *SessionCompleted:
		err = s.applySessionCompleted(rec, p)
	case *SessionAbandoned:
		err = s.applySessionAbandoned(rec, p)
	case *MeetingBooked:
		err = s.applyMeetingBooked(rec, p)
	case *WebhookRegistered:
		err = s.applyWebhookRegistered(rec, p)
	case *WebhookDeleted:
		err = s.applyWebhookDeleted(rec, p)
	case *WebhookDisabled:
		err = s.applyWebhookDisabled(rec, p)
	default:
		err = errorf("no projection for %T", payload)
	}
	if err != nil {
		return fmt.Errorf("seq %d (%s): %w", rec.Seq, rec.Type, err)
	}
	s.seq = rec.Seq
	return nil
}

func (s *State) applyAccountCreated(rec *eventlog.Record, p *AccountCreated) error {
	if p.AccountID != rec.Account {
		return fmt.Errorf("account_id %q differs from the record's account %q", p.AccountID, rec.Account)
	}
	if s.accounts[p.AccountID] != nil {
		return fmt.Errorf("account %s exists", p.AccountID)
	}
	a := &Account{ID: p.AccountID, Name: p.Name, Plan: p.Plan, RateLimitPerMinute: p.RateLimitPerMinute, CreatedAt: Timestamp(rec.Time)}
	s.accounts[a.ID] = a
	s.accountOrder = append(s.accountOrder, a)
	s.tenants[a.ID] = newTenant(a)
	return nil
}

func (s *State) applyKeyCreated(rec *eventlog.Record, p *APIKeyCreated) error {
	if s.accounts[rec.Account] == nil {
		return fmt.Errorf("key %s for unknown account %q", p.KeyID, rec.Account)
	}
	if s.keys[p.KeyID] != nil {
		return fmt.Errorf("key %s exists", p.KeyID)
	}
	var h [sha256.Size]byte
	if b, err := hex.DecodeString(p.KeyHash); err != nil || len(b) != len(h) {
		return fmt.Errorf("key %s: key_hash is not a hex SHA-256", p.KeyID)
	} else {
		copy(h[:], b)
	}
	k := &APIKey{ID: p.KeyID, AccountID: rec.Account, Hash: h, Last4: p.Last4, CreatedAt: Timestamp(rec.Time)}
	s.keys[k.ID] = k
	s.keysByHash[h] = k
	s.keyOrder = append(s.keyOrder, k)
	return nil
}

func (s *State) applyKeyRevoked(rec *eventlog.Record, p *APIKeyRevoked) error {
	k := s.keys[p.KeyID]
	if k == nil || k.AccountID != rec.Account {
		return fmt.Errorf("revoking unknown key %s", p.KeyID)
	}
	if k.RevokedAt == nil {
		t := Timestamp(rec.Time)
		k.RevokedAt = &t
	}
	return nil
}
