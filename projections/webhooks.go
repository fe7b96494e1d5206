package projections

import (
	"context"
	"encoding/base64"
	"errors"

	"demosvc/delivery/netguard"
	"demosvc/eventlog"
)

// Webhook event names, as subscribed and as sent.
var webhookEvents = []string{"contact.created", "demo.abandoned", "demo.completed", "lead.hot", "meeting.booked",
	"webhook.disabled", "webhook.enabled"}

// SecretPrefix starts every webhook signing secret.
const SecretPrefix = "whsec_"

// webhookSecretBytes is the entropy of a signing secret.
const webhookSecretBytes = 32

type webhook struct {
	id     string
	tenant *tenant
	seq    uint64 // of webhook.registered: the list order and the first event it may receive
	url    string
	events []string
	// earlier are the lists of events it had before events, oldest first:
	// an event is sent by the list in force when it was recorded, not by
	// the one in force when the delivery side reads it. Appended to, never
	// changed: a cut in progress holds a copy of the slice.
	earlier []subscription
	// eventsSince is the seq of the record that set the current set of
	// events: its registration, or the last update that changed it.
	eventsSince uint64
	secret      eventlog.Sealed
	createdAt   int64
	disabled    bool // delivery stopped: see disabledReason
	// disabledReason is the code of the webhook.disabled that disabled it
	// (gone, failing, manual); disabledAt its time.
	disabledReason string
	disabledAt     int64
	rateLimit      int // deliveries started per second; 0: no limit
	// prevSecret keeps signing beside secret until prevUntil (unix
	// seconds) after a rotation.
	prevSecret eventlog.Sealed
	prevUntil  int64
	// disabledSeq is the seq of the webhook.disabled that disabled it
	// last.
	disabledSeq uint64
	// skipped are the windows of records it is not sent, oldest first:
	// from a webhook.disabled (after) to the webhook.enabled with
	// skip_backlog that ended it (through). What came while it was
	// enabled, delivered or not yet, is sent whatever the cursor.
	// Appended to, never changed, as earlier.
	skipped []seqWindow
	// version is the seq of the last event that changed what the delivery
	// side sends to it (registration, update, rotation, enabling).
	version uint64
}

// seqWindow is the records after after, up to through.
type seqWindow struct{ after, through uint64 }

func (w seqWindow) holds(seq uint64) bool { return w.after < seq && seq <= w.through }

// subscription is a list of events a webhook had: it judged the records up
// to until, the seq of the webhook.updated that replaced it.
type subscription struct {
	until  uint64
	events []string
}

// WebhookView is a webhook as the API shows it; Secret is set only in the
// answer to its registration.
type WebhookView struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Status string   `json:"status"`
	// DisabledReason says why a disabled webhook gets nothing: "gone" (its
	// receiver answered 410 Gone), "failing" (every attempt failed for
	// delivery.disable_after), "manual" (PATCH status disabled) or
	// "secret_unavailable" (its signing secret does not open under this
	// data dir's master key, as after an import without master.key).
	DisabledReason string `json:"disabled_reason,omitempty"`
	// DisabledAt is when it was disabled (not set for secret_unavailable,
	// which is no event but this process's view).
	DisabledAt string `json:"disabled_at,omitempty"`
	// RateLimitPerSecond bounds the deliveries started per second; 0 is no
	// limit.
	RateLimitPerSecond int `json:"rate_limit_per_second"`
	// PreviousSecretExpiresAt is, after a rotation with an overlap, when
	// the replaced secret stops signing.
	PreviousSecretExpiresAt string `json:"previous_secret_expires_at,omitempty"`
	CreatedAt               string `json:"created_at"`
	Secret                  string `json:"secret,omitempty"`
}

// Reasons a webhook is disabled.
const (
	DisabledGone              = "gone"
	DisabledSecretUnavailable = "secret_unavailable"
)

func (w *webhook) view() WebhookView {
	v := WebhookView{ID: w.id, URL: w.url, Events: append([]string(nil), w.events...), Status: "enabled",
		RateLimitPerSecond: w.rateLimit, CreatedAt: apiTime(w.createdAt)}
	if w.disabled {
		v.Status, v.DisabledReason, v.DisabledAt = "disabled", w.disabledReason, apiTime(w.disabledAt)
	}
	if w.prevUntil > 0 {
		v.PreviousSecretExpiresAt = apiTime(w.prevUntil)
	}
	return v
}

// viewWebhook is w's view as this process can serve it: a webhook whose
// secret does not open under the master key is disabled, whatever the
// log says, since nothing can be signed for it.
func (p *Projections) viewWebhook(w *webhook) WebhookView {
	v := w.view()
	if !w.disabled && p.opts.Sealer != nil {
		if _, err := p.opts.Sealer.Open(w.secret); err != nil {
			v.Status, v.DisabledReason = "disabled", DisabledSecretUnavailable
		}
	}
	return v
}

// UnavailableSecrets returns the webhooks whose signing secret does not
// open under the master key: serve names them once at start-up.
func (p *Projections) UnavailableSecrets() []string {
	var out []string
	p.View(func(s *State) {
		for _, acc := range s.accountOrder {
			for _, w := range s.tenants[acc.ID].webhooks {
				if p.viewWebhook(w).DisabledReason == DisabledSecretUnavailable {
					out = append(out, w.id)
				}
			}
		}
	})
	return out
}

// SealedValues counts what the state holds sealed under the master key:
// webhook signing secrets and dashboard password hashes. A data dir whose
// log holds any cannot take a new master key unnoticed (serve).
func (p *Projections) SealedValues() int {
	n := 0
	p.View(func(s *State) {
		for _, acc := range s.accountOrder {
			for _, w := range s.tenants[acc.ID].webhooks {
				if len(w.secret) > 0 {
					n++
				}
			}
		}
		for _, r := range s.users.order {
			if len(r.password) > 0 {
				n++
			}
		}
	})
	return n
}

// WebhookInput is the body of POST /v1/webhooks.
type WebhookInput struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// RateLimitPerSecond, if set and not 0, bounds the deliveries started
	// per second.
	RateLimitPerSecond *int `json:"rate_limit_per_second,omitempty"`
}

// Validate checks a registration: an absolute http(s) URL without
// credentials whose host is written canonically, and a non-empty list of
// known, distinct event names. With allowPrivate false, a URL whose host
// is a literal address that is not public (netguard.Public: every IANA
// special-purpose range) or a localhost name is refused; names are checked
// again on the address dialled, when sent.
func (in *WebhookInput) Validate(allowPrivate bool) error {
	if err := checkURL("url", in.URL); err != nil {
		return err
	}
	if err := netguard.CheckURL(in.URL, allowPrivate); err != nil {
		msg := err.Error()
		if errors.Is(err, netguard.ErrNotPublic) {
			msg += "; deliveries there are refused (delivery.allow_private_networks)"
		}
		// The whole sentence is ours (the URL is at most maxURLBytes), so
		// it is not clipped as an echoed value would be.
		return &Error{Code: EInvalid, Message: msg, Param: "url"}
	}
	if err := checkEvents(in.Events); err != nil {
		return err
	}
	if in.RateLimitPerSecond != nil {
		return checkRateLimit(*in.RateLimitPerSecond)
	}
	return nil
}

// RegisterWebhook registers a webhook and answers its signing secret, the
// only time it is shown. The log holds the secret sealed under the master
// key.
func (p *Projections) RegisterWebhook(ctx context.Context, pr Principal, in WebhookInput, idem *Idempotency) (any, error) {
	if err := in.Validate(p.opts.AllowPrivateNetworks); err != nil {
		return nil, err
	}
	if p.opts.Sealer == nil {
		return nil, Errorf(EInternal, "no master key to seal webhook secrets with")
	}
	secret := SecretPrefix + base64.StdEncoding.EncodeToString(p.log.IDs().Random(webhookSecretBytes))
	sealed, err := p.opts.Sealer.Seal([]byte(secret))
	if err != nil {
		return nil, err
	}
	id := p.log.IDs().New(PrefixWebhook)
	max := p.opts.MaxWebhooks
	return p.Do(ctx, Command{
		Account: pr.Account.ID, Actor: pr.KeyID, Idem: idem,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			if t := s.tenants[pr.Account.ID]; t != nil && max > 0 && len(t.webhooks) >= max {
				return nil, nil, Errorf(ELimitExceeded, "an account can have at most %d webhooks; delete one first", max)
			}
			events := []any{&WebhookRegistered{WebhookID: id, URL: in.URL, Events: in.Events, Secret: sealed}}
			if in.RateLimitPerSecond != nil && *in.RateLimitPerSecond != 0 {
				// The registration's payload stays version 1: a limit is
				// an update recorded with it.
				events = append(events, &WebhookUpdated{WebhookID: id, RateLimitPerSecond: in.RateLimitPerSecond})
			}
			return events, nil, nil
		},
		Result: func(s *State) any {
			v := s.webhooks[id].view()
			v.Secret = secret
			return v
		},
	})
}

// DeleteWebhook removes a webhook: nothing more is sent to it.
func (p *Projections) DeleteWebhook(ctx context.Context, pr Principal, webhookID string) error {
	_, err := p.Do(ctx, Command{
		Account: pr.Account.ID, Actor: pr.KeyID,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			if _, ok := webhookKind.in(s, pr.Account.ID, webhookID); !ok {
				return nil, nil, notFound("webhook", webhookID)
			}
			return []any{&WebhookDeleted{WebhookID: webhookID}}, nil, nil
		},
	})
	return err
}

// DisableWebhook stops delivery to a webhook, a decision of the delivery
// side: its receiver answered 410 Gone (reason DisabledGone) or every
// attempt failed for delivery.disable_after (DisabledFailing); detail says
// it in a sentence. It stays listed, with status disabled, until enabled.
func (p *Projections) DisableWebhook(ctx context.Context, webhookID, reason, detail string) error {
	var account string
	p.View(func(s *State) {
		if w := s.webhooks[webhookID]; w != nil {
			account = w.tenant.account.ID
		}
	})
	_, err := p.Do(ctx, Command{
		Account: account, Actor: "delivery",
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			w := s.webhooks[webhookID]
			// A receiver's 410 Gone is recorded on a webhook paused by
			// hand too (an attempt in flight as it was paused): the
			// pending deliveries are failed for it, and the reason shows
			// why, and tells the webhooks watching, rather than a pause
			// that would resume as if the receiver had not said it.
			regone := w != nil && w.disabled && reason == DisabledGone && w.disabledReason != DisabledGone
			if w == nil || w.disabled && !regone {
				return nil, nil, nil
			}
			return []any{&WebhookDisabled{WebhookID: webhookID, Reason: reason, Detail: detail}}, nil, nil
		},
	})
	return err
}

// Webhook returns one webhook of account, without its secret.
func (p *Projections) Webhook(account, webhookID string) (WebhookView, error) {
	return one(p, webhookKind, account, webhookID, p.viewWebhook)
}

// Webhooks lists the webhooks of account, most recent first.
func (p *Projections) Webhooks(account string, q ListQuery) (Page[WebhookView], error) {
	return page(p, webhookKind, account, q, nil, p.viewWebhook)
}

// WebhookIDs returns the ids of every registered webhook, enabled or not.
func (s *State) WebhookIDs() []string {
	out := make([]string, 0, len(s.webhooks))
	for _, acc := range s.accountOrder {
		for _, w := range s.tenants[acc.ID].webhooks {
			out = append(out, w.id)
		}
	}
	return out
}
