package projections

import "demosvc/eventlog"

// Event type names, as stored in the log. Payload structs below are version
// 1 of each; a change to one is a new version with an upcaster, never an
// edit of the old struct.
const (
	TypeAccountCreated    = "account.created"
	TypeAPIKeyCreated     = "api_key.created"
	TypeAPIKeyRevoked     = "api_key.revoked"
	TypeAgentCreated      = "agent.created"
	TypeAgentUpdated      = "agent.updated"
	TypeContactCreated    = "contact.created"
	TypeSessionStarted    = "session.started"
	TypeSessionProgressed = "session.progressed"
	TypeLeadHot           = "lead.hot"
	TypeSessionCompleted  = "session.completed"
	TypeSessionAbandoned  = "session.abandoned"
	TypeMeetingBooked     = "meeting.booked"
	TypeWebhookRegistered = "webhook.registered"
	TypeWebhookDeleted    = "webhook.deleted"
	TypeWebhookDisabled   = "webhook.disabled"
)

// AccountCreated opens an account. RateLimitPerMinute is the enterprise
// plan's own figure (0 = unlimited); other plans take theirs from config.
type AccountCreated struct {
	AccountID          string `json:"account_id"`
	Name               string `json:"name"`
	Plan               string `json:"plan"`
	RateLimitPerMinute int    `json:"rate_limit_per_minute"`
}

// APIKeyCreated records a new API key by the SHA-256 of the key, never the
// key itself.
type APIKeyCreated struct {
	KeyID   string `json:"key_id"`
	KeyHash string `json:"key_hash"` // lowercase hex SHA-256 of the whole key
	Last4   string `json:"last4"`
}

// APIKeyRevoked revokes a key; it is refused from then on.
type APIKeyRevoked struct {
	KeyID string `json:"key_id"`
}

// AgentCreated creates an agent.
type AgentCreated struct {
	AgentID    string `json:"agent_id"`
	Name       string `json:"name"`
	SandboxURL string `json:"sandbox_url"`
	Persona    string `json:"persona"`
	Status     string `json:"status"`
}

// AgentUpdated changes the fields that are set; nil fields were not in the
// request and stay as they are.
type AgentUpdated struct {
	AgentID    string  `json:"agent_id"`
	Name       *string `json:"name"`
	SandboxURL *string `json:"sandbox_url"`
	Persona    *string `json:"persona"`
	Status     *string `json:"status"`
}

// Contact is a prospect as captured by a session.
type Contact struct {
	Name    string `json:"name"`
	Email   string `json:"email"`
	Company string `json:"company"`
}

// ContactCreated captures a prospect whose e-mail is new to the account.
type ContactCreated struct {
	ContactID string  `json:"contact_id"`
	Contact   Contact `json:"contact"`
	SessionID string  `json:"session_id"`
	AgentID   string  `json:"agent_id"`
}

// Signals is the intent signal breakdown of a session, each 0..100.
type Signals struct {
	Interest      int `json:"interest"`
	Objections    int `json:"objections"`
	BuyingSignals int `json:"buying_signals"`
}

// SessionStarted starts a session in_progress.
type SessionStarted struct {
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id"`
	ContactID string `json:"contact_id"`
}

// SessionProgressed reports live figures of a session in_progress; nil
// fields are unchanged.
type SessionProgressed struct {
	SessionID       string   `json:"session_id"`
	IntentScore     *int     `json:"intent_score"`
	Signals         *Signals `json:"signals"`
	DurationSeconds *int     `json:"duration_seconds"`
}

// LeadHot records that a session's intent score reached the hot threshold
// in force when the decision was made.
type LeadHot struct {
	SessionID   string `json:"session_id"`
	IntentScore int    `json:"intent_score"`
	Threshold   int    `json:"threshold"`
}

// SessionCompleted ends a session as completed.
type SessionCompleted struct {
	SessionID       string  `json:"session_id"`
	IntentScore     int     `json:"intent_score"`
	Signals         Signals `json:"signals"`
	DurationSeconds int     `json:"duration_seconds"`
	ReplayURL       string  `json:"replay_url"`
}

// SessionAbandoned ends a session as abandoned; nil fields are unchanged.
type SessionAbandoned struct {
	SessionID       string   `json:"session_id"`
	IntentScore     *int     `json:"intent_score"`
	Signals         *Signals `json:"signals"`
	DurationSeconds *int     `json:"duration_seconds"`
	ReplayURL       *string  `json:"replay_url"`
}

// MeetingBooked books the follow-up meeting of a session.
type MeetingBooked struct {
	SessionID    string `json:"session_id"`
	ScheduledAt  string `json:"scheduled_at"` // RFC 3339 UTC
	CalendarLink string `json:"calendar_link"`
}

// WebhookRegistered registers a webhook. The signing secret is sealed
// under the master key.
type WebhookRegistered struct {
	WebhookID string          `json:"webhook_id"`
	URL       string          `json:"url"`
	Events    []string        `json:"events"`
	Secret    eventlog.Sealed `json:"secret"`
}

// WebhookDeleted removes a webhook; nothing more is sent to it.
type WebhookDeleted struct {
	WebhookID string `json:"webhook_id"`
}

// NewRegistry returns the registry of every domain event payload.
func NewRegistry() *eventlog.Registry {
	r := eventlog.NewRegistry()
	eventlog.Register[AccountCreated](r, TypeAccountCreated, 1)
	eventlog.Register[APIKeyCreated](r, TypeAPIKeyCreated, 1)
	eventlog.Register[APIKeyRevoked](r, TypeAPIKeyRevoked, 1)
	eventlog.Register[AgentCreated](r, TypeAgentCreated, 1)
	eventlog.Register[AgentUpdated](r, TypeAgentUpdated, 1)
	eventlog.Register[ContactCreated](r, TypeContactCreated, 1)
	eventlog.Register[SessionStarted](r, TypeSessionStarted, 1)
	eventlog.Register[SessionProgressed](r, TypeSessionProgressed, 1)
	eventlog.Register[LeadHot](r, TypeLeadHot, 1)
	eventlog.Register[SessionCompleted](r, TypeSessionCompleted, 1)
	eventlog.Register[SessionAbandoned](r, TypeSessionAbandoned, 1)
	eventlog.Register[MeetingBooked](r, TypeMeetingBooked, 1)
	eventlog.Register[WebhookRegistered](r, TypeWebhookRegistered, 1)
	eventlog.Register[WebhookDeleted](r, TypeWebhookDeleted, 1)
	registerWebhookOpEvents(r)
	registerUserEvents(r)
	return r
}
