package projections

import (
	"crypto/sha256"
	"time"
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
	// authGen counts the changes to accounts and keys, which the
	// published authentication index is built from (auth.go).
	authGen uint64

	tenants   map[string]*tenant
	tenantNum []*tenant // by number, in creation order
	agents    map[ID]*agent
	agentNum  []*agent // by number, in creation order
	contacts  table[contact]
	sessions  table[session]
	// What sessions and contacts refer to by number (model.go).
	meetings    list[meeting]
	timelines   timelines
	contactMore list[list[uint32]]
	webhooks    map[string]*webhook
	// webhookSeq is the seq of the last record that registered, changed
	// or deleted a webhook (0 for none since the state was loaded): the
	// delivery side rebuilds its targets only when it moves.
	webhookSeq uint64

	users userState // dashboard users, setup links and sessions (userstate.go)

	// The strings of sessions, contacts and meetings (blocks.go).
	text text

	// cut is the snapshot being encoded, if any: apply keeps there what
	// it changes of the state at the cut (snapshot_cut.go).
	cut *snapCut
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
	// CreatedBy is the actor that created the key: "cli" or a user id.
	CreatedBy string `json:"-"`
}

// Timestamp is a time as the API shows it: RFC 3339, UTC, whole seconds.
// The log keeps full precision.
type Timestamp time.Time

// MarshalJSON renders t as "2006-01-02T15:04:05Z".
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(timeFormat) + `"`), nil
}

func timeOf(t Timestamp) time.Time { return time.Time(t) }

// String renders t as the API does.
func (t Timestamp) String() string { return time.Time(t).UTC().Format(timeFormat) }

// NewState returns the state of an empty log.
func NewState() *State {
	s := &State{
		accounts:   map[string]*Account{},
		keys:       map[string]*APIKey{},
		keysByHash: map[[sha256.Size]byte]*APIKey{},
		tenants:    map[string]*tenant{},
		agents:     map[ID]*agent{},
		webhooks:   map[string]*webhook{},
	}
	s.users.init()
	return s
}

// Seq returns the seq of the last applied event.
func (s *State) Seq() uint64 { return s.seq }
