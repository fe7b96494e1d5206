package projections

import (
	"slices"
	"unicode/utf8"

	"demosvc/eventlog"
)

// The events of webhook operations (issue 12): updates, enabling and
// disabling, secret rotation, test events and redelivery requests. Each is
// version 1 of its type except webhook.disabled, whose version 2 names the
// reason by code.

// Event types of webhook operations.
const (
	TypeWebhookUpdated             = "webhook.updated"
	TypeWebhookEnabled             = "webhook.enabled"
	TypeWebhookSecretRotated       = "webhook.secret_rotated"
	TypeWebhookTestRequested       = "webhook.test_requested"
	TypeWebhookRedeliveryRequested = "webhook.redelivery_requested"
)

// Limits of webhook operations.
const (
	// MaxRateLimitPerSecond bounds a webhook's rate_limit_per_second.
	MaxRateLimitPerSecond = 10_000
	// MaxPreviousSecretSeconds bounds previous_expires_in: 7 days.
	MaxPreviousSecretSeconds = 7 * 24 * 3600
	// DefaultPreviousSecretSeconds is previous_expires_in when not sent.
	DefaultPreviousSecretSeconds = 86400
	// MaxRedelivery bounds the deliveries one recover or replay call
	// queues; more remain to a next call.
	MaxRedelivery = 500
	// maxTestMessage bounds a test event's message.
	maxTestMessage = 1024
)

// Reasons a webhook is disabled, besides DisabledGone and
// DisabledSecretUnavailable.
const (
	// DisabledFailing: every attempt failed for delivery.disable_after.
	DisabledFailing = "failing"
	// DisabledManual: an operator set its status to disabled.
	DisabledManual = "manual"
)

// WebhookUpdated changes the fields that are set; nil fields were not in
// the request and stay as they are.
type WebhookUpdated struct {
	WebhookID          string   `json:"webhook_id"`
	URL                *string  `json:"url"`
	Events             []string `json:"events"` // nil: unchanged
	RateLimitPerSecond *int     `json:"rate_limit_per_second"`
}

// WebhookEnabled delivers to a disabled webhook again. Without SkipBacklog
// it resumes from its cursor, so events recorded while it was disabled
// are delivered; with it, only events after this one are.
type WebhookEnabled struct {
	WebhookID   string `json:"webhook_id"`
	SkipBacklog bool   `json:"skip_backlog"`
}

// WebhookDisabledV1 is version 1 of webhook.disabled: Reason was a
// sentence, and only 410 Gone disabled a webhook.
type WebhookDisabledV1 struct {
	WebhookID string `json:"webhook_id"`
	Reason    string `json:"reason"`
}

// WebhookDisabled stops delivery to a webhook: Reason is a code (gone,
// failing, manual), Detail a sentence for people.
type WebhookDisabled struct {
	WebhookID string `json:"webhook_id"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail"`
}

// WebhookSecretRotated replaces a webhook's signing secret, sealed under
// the master key. The secret it replaces keeps signing beside the new one
// until PreviousExpiresAt (unix seconds; 0: not at all); one replaced
// before ends at once.
type WebhookSecretRotated struct {
	WebhookID         string          `json:"webhook_id"`
	Secret            eventlog.Sealed `json:"secret"`
	PreviousExpiresAt int64           `json:"previous_expires_at"`
}

// WebhookTestRequested asks for a webhook.test event to one webhook; the
// delivery side turns it into the delivery DeliveryID.
type WebhookTestRequested struct {
	WebhookID  string `json:"webhook_id"`
	DeliveryID string `json:"delivery_id"`
	Message    string `json:"message"`
}

// Redelivery modes.
const (
	RedeliverRecover = "recover" // failed deliveries, sent again
	RedeliverReplay  = "replay"  // events, sent as new deliveries
)

// WebhookRedeliveryRequested asks the delivery side to send again: the
// failed deliveries DeliveryIDs (recover) or the events at Seqs (replay).
// The request names exactly what it queues, so that its answer (how many)
// and what the delivery side does agree, whenever it is read.
type WebhookRedeliveryRequested struct {
	WebhookID   string   `json:"webhook_id"`
	Mode        string   `json:"mode"`
	DeliveryIDs []string `json:"delivery_ids"`
	Seqs        []uint64 `json:"seqs"`
}

func registerWebhookOpEvents(r *eventlog.Registry) {
	eventlog.Register[WebhookDisabledV1](r, TypeWebhookDisabled, 1)
	eventlog.RegisterUpcast(r, TypeWebhookDisabled, 1, func(p WebhookDisabledV1) WebhookDisabled {
		return WebhookDisabled{WebhookID: p.WebhookID, Reason: DisabledGone, Detail: p.Reason}
	})
	eventlog.Register[WebhookDisabled](r, TypeWebhookDisabled, 2)
	eventlog.Register[WebhookUpdated](r, TypeWebhookUpdated, 1)
	eventlog.Register[WebhookEnabled](r, TypeWebhookEnabled, 1)
	eventlog.Register[WebhookSecretRotated](r, TypeWebhookSecretRotated, 1)
	eventlog.Register[WebhookTestRequested](r, TypeWebhookTestRequested, 1)
	eventlog.Register[WebhookRedeliveryRequested](r, TypeWebhookRedeliveryRequested, 1)
}

// Validate checks a webhook.disabled version 1 payload.
func (p *WebhookDisabledV1) Validate() error {
	return checkIDField("webhook_id", PrefixWebhook, p.WebhookID)
}

// Validate checks a webhook.disabled payload.
func (p *WebhookDisabled) Validate() error {
	if !slices.Contains([]string{DisabledGone, DisabledFailing, DisabledManual}, p.Reason) {
		return ParamErrorf(EInvalid, "reason", "must be gone, failing or manual")
	}
	return checkIDField("webhook_id", PrefixWebhook, p.WebhookID)
}

// Validate checks a webhook.updated payload.
func (p *WebhookUpdated) Validate() error {
	if err := checkIDField("webhook_id", PrefixWebhook, p.WebhookID); err != nil {
		return err
	}
	if p.URL != nil {
		if err := checkURL("url", *p.URL); err != nil {
			return err
		}
	}
	if p.Events != nil {
		if err := checkEvents(p.Events); err != nil {
			return err
		}
	}
	if p.RateLimitPerSecond != nil {
		return checkRateLimit(*p.RateLimitPerSecond)
	}
	return nil
}

// Validate checks a webhook.enabled payload.
func (p *WebhookEnabled) Validate() error {
	return checkIDField("webhook_id", PrefixWebhook, p.WebhookID)
}

// Validate checks a webhook.secret_rotated payload.
func (p *WebhookSecretRotated) Validate() error {
	if len(p.Secret) == 0 {
		return ParamErrorf(EInvalid, "secret", "must be sealed")
	}
	if p.PreviousExpiresAt < 0 {
		return ParamErrorf(EInvalid, "previous_expires_at", "must not be negative")
	}
	return checkIDField("webhook_id", PrefixWebhook, p.WebhookID)
}

// checkTestMessage checks a test event's message: at most maxTestMessage
// bytes of UTF-8 (a dashboard form can send any bytes; JSON cannot carry
// others, so an export would alter them and its import fail).
func checkTestMessage(m string) error {
	if len(m) > maxTestMessage {
		return ParamErrorf(EInvalid, "message", "must be at most %d bytes", maxTestMessage)
	}
	if !utf8.ValidString(m) {
		return ParamErrorf(EInvalid, "message", "must be valid UTF-8")
	}
	return nil
}

// Validate checks a webhook.test_requested payload.
func (p *WebhookTestRequested) Validate() error {
	if err := checkTestMessage(p.Message); err != nil {
		return err
	}
	return firstError(checkIDField("webhook_id", PrefixWebhook, p.WebhookID), checkIDField("delivery_id", "dlv_", p.DeliveryID))
}

// Validate checks a webhook.redelivery_requested payload.
func (p *WebhookRedeliveryRequested) Validate() error {
	if err := checkIDField("webhook_id", PrefixWebhook, p.WebhookID); err != nil {
		return err
	}
	switch {
	case p.Mode == RedeliverRecover && len(p.Seqs) == 0 && len(p.DeliveryIDs) <= MaxRedelivery:
		for _, id := range p.DeliveryIDs {
			if err := checkIDField("delivery_ids", "dlv_", id); err != nil {
				return err
			}
		}
		return nil
	case p.Mode == RedeliverReplay && len(p.DeliveryIDs) == 0 && len(p.Seqs) <= MaxRedelivery:
		return nil
	}
	return ParamErrorf(EInvalid, "mode", "must be recover with delivery_ids or replay with seqs, at most %d", MaxRedelivery)
}

// checkEvents checks a list of subscribed event names: non-empty, known,
// distinct.
func checkEvents(events []string) error {
	if len(events) == 0 {
		return ParamErrorf(EInvalid, "events", "must name at least one event: %v", webhookEvents)
	}
	seen := map[string]bool{}
	for i, e := range events {
		if !slices.Contains(webhookEvents, e) {
			return ParamErrorf(EInvalid, "events", "events[%d] %q is not an event; known: %v", i, e, webhookEvents)
		}
		if seen[e] {
			return ParamErrorf(EInvalid, "events", "events[%d] %q is listed twice", i, e)
		}
		seen[e] = true
	}
	return nil
}

func checkRateLimit(n int) error {
	if n < 0 || n > MaxRateLimitPerSecond {
		return ParamErrorf(EInvalid, "rate_limit_per_second", "must be an integer from 0 (no limit) to %d", MaxRateLimitPerSecond)
	}
	return nil
}

// WebhookEventNames returns the events a webhook may subscribe to, sorted:
// the dashboard's registration form offers them.
func WebhookEventNames() []string { return slices.Clone(webhookEvents) }
