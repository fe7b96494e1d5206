package projections

import (
	"context"
	"encoding/base64"
	"slices"
	"time"

	"demosvc/eventlog"
)

// The commands of webhook operations: PATCH, secret rotation, test
// events and redelivery requests. Each is decided on the writer and
// recorded as an event; the delivery side acts on the events.

// WebhookPatch is a PATCH of a webhook: nil fields (and nil Events) were
// not sent and stay as they are.
type WebhookPatch struct {
	URL                *string
	Events             []string
	RateLimitPerSecond *int
	Status             *string // "enabled" or "disabled"
	// SkipBacklog, with Status "enabled" on a disabled webhook, resumes
	// delivery after the enabling event rather than from the cursor.
	SkipBacklog bool
}

// Validate checks a patch by the rules of registration.
func (in *WebhookPatch) Validate(allowPrivate bool) error {
	if in.URL != nil {
		if err := checkWebhookURL(*in.URL, allowPrivate); err != nil {
			return err
		}
	}
	if in.Events != nil {
		if err := checkEvents(in.Events); err != nil {
			return err
		}
	}
	if in.RateLimitPerSecond != nil {
		if err := checkRateLimit(*in.RateLimitPerSecond); err != nil {
			return err
		}
	}
	if in.Status != nil && *in.Status != "enabled" && *in.Status != "disabled" {
		return ParamErrorf(EInvalid, "status", "must be enabled or disabled")
	}
	if in.SkipBacklog && (in.Status == nil || *in.Status != "enabled") {
		return ParamErrorf(EInvalid, "skip_backlog", `applies only with "status":"enabled"`)
	}
	return nil
}

// checkWebhookURL is the URL rule of registration (see WebhookInput).
func checkWebhookURL(u string, allowPrivate bool) error {
	in := WebhookInput{URL: u, Events: webhookEvents[:1]}
	return in.Validate(allowPrivate)
}

// UpdateWebhook changes the fields a PATCH sent: url, events and
// rate_limit_per_second as one webhook.updated event (any of them sent,
// even unchanged), and status as webhook.disabled (reason manual) or
// webhook.enabled when it changes. An empty patch changes nothing.
func (p *Projections) UpdateWebhook(ctx context.Context, pr Principal, webhookID string, in WebhookPatch) (WebhookView, error) {
	if err := in.Validate(p.opts.AllowPrivateNetworks); err != nil {
		return WebhookView{}, err
	}
	var id string
	v, err := p.Do(ctx, Command{
		Account: pr.Account.ID, Actor: pr.KeyID,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			w, ok := webhookKind.in(s, pr.Account.ID, webhookID)
			if !ok {
				return nil, nil, notFound("webhook", webhookID)
			}
			id = w.id
			var events []any
			if in.URL != nil || in.Events != nil || in.RateLimitPerSecond != nil {
				events = append(events, &WebhookUpdated{WebhookID: w.id, URL: in.URL, Events: in.Events, RateLimitPerSecond: in.RateLimitPerSecond})
			}
			switch {
			case in.Status == nil:
			case *in.Status == "disabled" && !w.disabled:
				events = append(events, &WebhookDisabled{WebhookID: w.id, Reason: DisabledManual, Detail: "disabled through the API"})
			case *in.Status == "enabled" && w.disabled:
				events = append(events, &WebhookEnabled{WebhookID: w.id, SkipBacklog: in.SkipBacklog})
			}
			return events, nil, nil
		},
		Result: func(s *State) any { return p.viewWebhook(s.webhooks[id]) },
	})
	if err != nil {
		return WebhookView{}, err
	}
	return v.(WebhookView), nil
}

// RotateWebhookSecret gives a webhook a new signing secret and answers it,
// the only time it is shown. The secret it replaces keeps signing beside
// it for previousExpiresIn seconds (0: it ends at once); a secret replaced
// before ends now. The log holds the new secret sealed.
func (p *Projections) RotateWebhookSecret(ctx context.Context, pr Principal, webhookID string, previousExpiresIn int, idem *Idempotency) (any, error) {
	if previousExpiresIn < 0 || previousExpiresIn > MaxPreviousSecretSeconds {
		return nil, ParamErrorf(EInvalid, "previous_expires_in", "must be from 0 to %d seconds (7 days)", MaxPreviousSecretSeconds)
	}
	if p.opts.Sealer == nil {
		return nil, Errorf(EInternal, "no master key to seal webhook secrets with")
	}
	secret := SecretPrefix + base64.StdEncoding.EncodeToString(p.log.IDs().Random(webhookSecretBytes))
	sealed, err := p.opts.Sealer.Seal([]byte(secret))
	if err != nil {
		return nil, err
	}
	var until int64
	if previousExpiresIn > 0 {
		until = p.log.IDs().Now().Add(time.Duration(previousExpiresIn) * time.Second).Unix()
	}
	var id string
	return p.Do(ctx, Command{
		Account: pr.Account.ID, Actor: pr.KeyID, Idem: idem,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			w, ok := webhookKind.in(s, pr.Account.ID, webhookID)
			if !ok {
				return nil, nil, notFound("webhook", webhookID)
			}
			id = w.id
			return []any{&WebhookSecretRotated{WebhookID: w.id, Secret: sealed, PreviousExpiresAt: until}}, nil, nil
		},
		Result: func(s *State) any {
			v := p.viewWebhook(s.webhooks[id])
			v.Secret = secret
			return v
		},
	})
}

// errDisabled refuses an operation that sends to a disabled webhook.
func errDisabled(w *webhook) error {
	return Errorf(EInvalidState, "webhook %s is disabled (%s); enable it first (PATCH status enabled)", w.id, w.disabledReason)
}

// TestWebhook records a webhook.test event for one enabled webhook; the
// delivery side sends it as the delivery deliveryID, through the normal
// path. answer renders the command's answer from the event's record.
func (p *Projections) TestWebhook(ctx context.Context, pr Principal, webhookID, message, deliveryID string,
	idem *Idempotency, answer func(rec *eventlog.Record) any) (any, error) {
	if err := checkTestMessage(message); err != nil {
		return nil, err
	}
	if message == "" {
		message = "This is a test event from demosvc."
	}
	return p.Do(ctx, Command{
		Account: pr.Account.ID, Actor: pr.KeyID, Idem: idem,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			w, err := sendable(s, pr.Account.ID, webhookID)
			if err != nil {
				return nil, nil, err
			}
			return []any{&WebhookTestRequested{WebhookID: w.id, DeliveryID: deliveryID, Message: message}}, nil, nil
		},
		ResultOf: func(_ *State, recs []eventlog.Record) any { return answer(&recs[0]) },
	})
}

// RedeliveryAnswer is the answer to a recover or replay: how many
// deliveries were queued, whether more remain in the window beyond this
// call's bound, and where the next call continues (its "after").
type RedeliveryAnswer struct {
	Queued int    `json:"queued"`
	More   bool   `json:"more"`
	Next   string `json:"next,omitempty"`
}

// Refuse answers a request refused before its command could be made
// (its webhook is gone, say) as the writer answers a refused command: a
// retry under an Idempotency-Key gets the answer recorded for the key,
// and otherwise err is the answer, recorded under the key as any
// refusal is.
func (p *Projections) Refuse(ctx context.Context, pr Principal, idem *Idempotency, err error) (any, error) {
	if idem == nil {
		return nil, err
	}
	return p.Do(ctx, Command{Account: pr.Account.ID, Actor: pr.KeyID, Idem: idem,
		Decide: func(*State) ([]any, []eventlog.Put, error) { return nil, nil, err }})
}

// RequestRedelivery records a recover (deliveryIDs) or replay (seqs)
// request for one enabled webhook, which the delivery side carries out,
// and answers answer. The caller has chosen what to queue, at most
// MaxRedelivery.
func (p *Projections) RequestRedelivery(ctx context.Context, pr Principal, webhookID, mode string, deliveryIDs []string,
	seqs []uint64, answer RedeliveryAnswer, idem *Idempotency) (any, error) {
	req := &WebhookRedeliveryRequested{Mode: mode, DeliveryIDs: deliveryIDs, Seqs: seqs}
	return p.Do(ctx, Command{
		Account: pr.Account.ID, Actor: pr.KeyID, Idem: idem,
		Decide: func(s *State) ([]any, []eventlog.Put, error) {
			w, err := sendable(s, pr.Account.ID, webhookID)
			if err != nil {
				return nil, nil, err
			}
			if len(deliveryIDs) == 0 && len(seqs) == 0 {
				return nil, nil, nil // nothing to queue: no event
			}
			r := *req
			r.WebhookID = w.id
			return []any{&r}, nil, nil
		},
		Result: func(*State) any { return answer },
	})
}

// WebhookSendable reports whether webhook id is registered, enabled, and
// of account: what a test, recover or replay needs.
func (p *Projections) WebhookSendable(account, webhookID string) error {
	var err error
	p.View(func(s *State) { _, err = sendable(s, account, webhookID) })
	return err
}

// sendable returns the account's webhook if it is enabled: test events,
// recovers and replays are refused for a disabled one.
func sendable(s *State, account, webhookID string) (*webhook, error) {
	w, ok := webhookKind.in(s, account, webhookID)
	switch {
	case !ok:
		return nil, notFound("webhook", webhookID)
	case w.disabled:
		return nil, errDisabled(w)
	}
	return w, nil
}

func (s *State) applyWebhookUpdated(rec *eventlog.Record, p *WebhookUpdated) error {
	w, err := webhookKind.of(s, rec, p.WebhookID)
	if err != nil {
		return err
	}
	// A cut in progress holds a copy; the events list is replaced, never
	// changed in place.
	if p.URL != nil {
		w.url = *p.URL
	}
	if p.Events != nil {
		// The list in force is kept for the records it judged, if any:
		// a record of the account came after it was set (t.events does
		// not hold this one yet). Changes with none between, a key
		// switching lists over and over, keep nothing.
		if !sameEvents(w.events, p.Events) {
			if ev := &w.tenant.events; ev.len() > 0 && ev.at(ev.len()-1) > w.eventsSince {
				w.earlier = append(w.earlier, subscription{until: rec.Seq, events: w.events})
			}
			w.eventsSince = rec.Seq
		}
		w.events = append([]string(nil), p.Events...) // in the order sent
	}
	if p.RateLimitPerSecond != nil {
		w.rateLimit = *p.RateLimitPerSecond
	}
	w.version, s.webhookSeq = rec.Seq, rec.Seq
	return nil
}

func (s *State) applyWebhookEnabled(rec *eventlog.Record, p *WebhookEnabled) error {
	w, err := webhookKind.of(s, rec, p.WebhookID)
	if err != nil {
		return err
	}
	if !w.disabled {
		return errorf("webhook %s is enabled", p.WebhookID)
	}
	w.disabled, w.disabledReason, w.disabledAt = false, "", 0
	if p.SkipBacklog {
		w.skipped = append(w.skipped, seqWindow{after: w.disabledSeq, through: rec.Seq})
	}
	w.version, s.webhookSeq = rec.Seq, rec.Seq
	return nil
}

func (s *State) applyWebhookDisabled(rec *eventlog.Record, p *WebhookDisabled) error {
	w, err := webhookKind.of(s, rec, p.WebhookID)
	if err != nil {
		return err
	}
	if w.disabled {
		// A 410 Gone on a webhook paused by hand (DisableWebhook): the
		// reason changes; since when, and the window skip_backlog skips,
		// still start at the pause.
		w.disabledReason = p.Reason
	} else {
		w.disabled, w.disabledReason, w.disabledAt = true, p.Reason, unix(rec.Time) // a cut in progress holds a copy
		w.disabledSeq = rec.Seq
	}
	s.webhookSeq = rec.Seq
	return nil
}

func (s *State) applyWebhookSecretRotated(rec *eventlog.Record, p *WebhookSecretRotated) error {
	w, err := webhookKind.of(s, rec, p.WebhookID)
	if err != nil {
		return err
	}
	w.prevSecret, w.prevUntil = nil, 0
	if p.PreviousExpiresAt > 0 {
		w.prevSecret, w.prevUntil = w.secret, p.PreviousExpiresAt
	}
	w.secret = p.Secret
	w.version, s.webhookSeq = rec.Seq, rec.Seq
	return nil
}

func (s *State) applyWebhookRequest(rec *eventlog.Record, webhookID string) error {
	if _, err := webhookKind.of(s, rec, webhookID); err != nil {
		return err
	}
	return nil
}

// SealAnswer seals a recorded answer that holds a secret (a webhook's
// registration or rotation), so that the idempotency store never keeps
// it in plaintext.
func (p *Projections) SealAnswer(b []byte) ([]byte, error) {
	if p.opts.Sealer == nil {
		return nil, Errorf(EInternal, "no master key to seal the answer with")
	}
	return p.opts.Sealer.Seal(b)
}

// OpenAnswer opens an answer SealAnswer sealed; ok is false for one that
// was not sealed (recorded before answers were).
func (p *Projections) OpenAnswer(b []byte) ([]byte, bool) {
	if p.opts.Sealer == nil {
		return nil, false
	}
	v, err := p.opts.Sealer.Open(b)
	return v, err == nil
}

// sameEvents reports whether two lists of event names name the same set.
func sameEvents(a, b []string) bool {
	for _, e := range a {
		if !slices.Contains(b, e) {
			return false
		}
	}
	for _, e := range b {
		if !slices.Contains(a, e) {
			return false
		}
	}
	return true
}
