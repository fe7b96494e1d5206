package http

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"demosvc/delivery"
	"demosvc/projections"
)

// The handlers of webhook operations: PATCH, rotate-secret, test,
// recover, replay, and one delivery with its attempts. Same shape as
// every handler: decode, validate, call, respond.

// webhookPatch is the body of PATCH /v1/webhooks/{id}; a field left out
// is nil (a null is refused by decodeStrict).
type webhookPatch struct {
	URL                *string   `json:"url"`
	Events             *[]string `json:"events"`
	Status             *string   `json:"status"`
	SkipBacklog        *bool     `json:"skip_backlog"`
	RateLimitPerSecond *int      `json:"rate_limit_per_second"`
}

func (s *Server) handleUpdateWebhook(w http.ResponseWriter, r *http.Request) {
	var in webhookPatch
	if _, ok := s.decodeBody(w, r, &in); !ok {
		return
	}
	patch := projections.WebhookPatch{URL: in.URL, Status: in.Status, RateLimitPerSecond: in.RateLimitPerSecond,
		SkipBacklog: in.SkipBacklog != nil && *in.SkipBacklog}
	if in.Events != nil {
		patch.Events = append([]string{}, *in.Events...)
	}
	v, err := s.deps.State.UpdateWebhook(r.Context(), principal(w), param(w, "id"), patch)
	s.respond(w, r, http.StatusOK, v, err)
}

// decodeOptional decodes a body that may be left out entirely: no body
// (Content-Length 0) is the zero value, whatever Content-Type says (many
// clients send application/json on every POST, body or not).
func (s *Server) decodeOptional(w http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	if r.ContentLength == 0 {
		return nil, true
	}
	return s.decodeBody(w, r, v)
}

// sealAnswers makes idem record its answer sealed: the answer holds a
// signing secret, which is never at rest in plaintext.
func (s *Server) sealAnswers(idem *projections.Idempotency) {
	if idem == nil {
		return
	}
	record := idem.Record
	idem.Record = func(v any, err error) []byte {
		b := record(v, err)
		sealed, serr := s.deps.State.SealAnswer(b)
		if serr != nil {
			// Nothing unsealed is kept: the request and its retries get
			// an error, not the secret.
			s.deps.Logger.Error("sealing an answer that holds a secret", "err", serr)
			return append([]byte{http.StatusInternalServerError >> 8, http.StatusInternalServerError & 0xff},
				`{"error":{"code":"internal_error","message":"internal error"}}`+"\n"...)
		}
		return sealed
	}
}

// respondSealed is respond for an answer sealAnswers recorded. One that
// does not open, and is not a plain answer recorded before answers were
// sealed, was sealed under another master key: the request it answered
// was made, and the answer is lost.
func (s *Server) respondSealed(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if rep, ok := v.(projections.Replay); ok {
		opened, ok := s.deps.State.OpenAnswer(rep.Response)
		switch {
		case ok:
			v = projections.Replay{Response: opened}
		case !plainRecord(rep.Response):
			s.deps.Logger.Warn("an idempotent answer does not open under this data dir's master key", "path", r.URL.Path)
			v, err = nil, apiError(projections.EIdempotencyConflict, "Idempotency-Key",
				"the answer recorded for this Idempotency-Key does not open under this data dir's master key (it changed since): "+
					"the request it answered was made; read its result with GET, or send another Idempotency-Key")
		}
	}
	s.respond(w, r, status, v, err)
}

// plainRecord reports whether b reads as an answer recorded unsealed: a
// status, then a JSON object.
func plainRecord(b []byte) bool {
	return len(b) > 2 && validStatus(int(binary.BigEndian.Uint16(b))) && b[2] == '{'
}

// validStatus reports whether code is a status an answer can have.
func validStatus(code int) bool { return code >= 100 && code <= 599 }

// rotateInput is the body of POST /v1/webhooks/{id}/rotate-secret.
type rotateInput struct {
	PreviousExpiresIn *int `json:"previous_expires_in"`
}

func (s *Server) handleRotateSecret(w http.ResponseWriter, r *http.Request) {
	var in rotateInput
	body, ok := s.decodeOptional(w, r, &in)
	if !ok {
		return
	}
	idem, ok := s.idempotency(w, r, body, http.StatusOK)
	if !ok {
		return
	}
	s.sealAnswers(idem)
	expires := projections.DefaultPreviousSecretSeconds
	if in.PreviousExpiresIn != nil {
		expires = *in.PreviousExpiresIn
	}
	v, err := s.deps.State.RotateWebhookSecret(r.Context(), principal(w), param(w, "id"), expires, idem)
	s.respondSealed(w, r, http.StatusOK, v, err)
}

// testInput is the body of POST /v1/webhooks/{id}/test.
type testInput struct {
	Message string `json:"message"`
}

func (s *Server) handleTestWebhook(w http.ResponseWriter, r *http.Request) {
	var in testInput
	body, ok := s.decodeOptional(w, r, &in)
	if !ok {
		return
	}
	if s.deps.Deliveries == nil {
		s.writeError(w, r, apiError(EUnavailable, "", "deliveries are not running"))
		return
	}
	idem, ok := s.idempotency(w, r, body, http.StatusCreated)
	if !ok {
		return
	}
	v, err := s.deps.Deliveries.SendTest(r.Context(), principal(w), param(w, "id"), in.Message, idem)
	s.respond(w, r, http.StatusCreated, v, err)
}

// windowInput is the body of POST /v1/webhooks/{id}/recover and /replay.
type windowInput struct {
	Since string `json:"since"`
	Until string `json:"until"`
	After string `json:"after"`
}

// ParseWindow validates a recover or replay window (RFC 3339 since,
// optional until after it, optional after from a previous answer) with
// the API's messages.
func ParseWindow(since, until, after string) (delivery.Window, error) {
	return windowInput{Since: since, Until: until, After: after}.window()
}

// window validates a recover or replay window.
func (in windowInput) window() (delivery.Window, error) {
	var win delivery.Window
	if in.Since == "" {
		return win, apiError(projections.EInvalid, "since", "since is required: an RFC 3339 timestamp such as 2026-11-21T15:00:00Z")
	}
	var err error
	if win.Since, err = time.Parse(time.RFC3339, in.Since); err != nil {
		return win, apiError(projections.EInvalid, "since", "since must be an RFC 3339 timestamp such as 2026-11-21T15:00:00Z")
	}
	if in.Until != "" {
		if win.Until, err = time.Parse(time.RFC3339, in.Until); err != nil {
			return win, apiError(projections.EInvalid, "until", "until must be an RFC 3339 timestamp such as 2026-11-21T15:00:00Z")
		}
		if !win.Until.After(win.Since) {
			return win, apiError(projections.EInvalid, "until", "until must be after since")
		}
	}
	win.After = in.After
	return win, nil
}

// redeliver handles recover and replay: it plans what this call queues
// (at most projections.MaxRedelivery), then records the request with its
// answer, idempotently under an Idempotency-Key.
func (s *Server) redeliver(mode string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in windowInput
		body, ok := s.decodeBody(w, r, &in)
		if !ok {
			return
		}
		win, err := in.window()
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		pr, wh := principal(w), param(w, "id")
		idem, ok := s.idempotency(w, r, body, http.StatusOK)
		if !ok {
			return
		}
		// The account's webhook, whatever its status: a disabled one is
		// refused by the command, after a retry under an Idempotency-Key
		// has been given its recorded answer (a redelivery can itself end
		// in a 410 that disables the webhook). A deleted one is refused
		// the same way: a retry still gets its recorded answer.
		if _, err := s.deps.State.Webhook(pr.Account.ID, wh); err != nil {
			v, err := s.deps.State.Refuse(r.Context(), pr, idem, err)
			s.respond(w, r, http.StatusOK, v, err)
			return
		}
		if s.deps.Deliveries == nil {
			s.writeError(w, r, apiError(EUnavailable, "", "deliveries are not running"))
			return
		}
		v, err := Redeliver(r.Context(), s.deps.State, s.deps.Deliveries, pr, wh, mode, win, idem)
		s.respond(w, r, http.StatusOK, v, err)
	}
}

// Redeliver plans what one recover (mode projections.RedeliverRecover)
// or replay call of webhook wh queues, at most projections.MaxRedelivery,
// and records it; the answer is a projections.RedeliveryAnswer (or a
// Replay under an Idempotency-Key). The one path of the API's recover
// and replay and the dashboard's buttons; the caller has checked that wh
// is the account's (the command refuses a disabled one).
func Redeliver(ctx context.Context, st *projections.Projections, dp *delivery.Dispatcher, pr projections.Principal,
	wh, mode string, win delivery.Window, idem *projections.Idempotency) (any, error) {
	var plan delivery.Plan
	var err error
	if mode == projections.RedeliverRecover {
		plan, err = dp.PlanRecover(wh, win)
	} else if t, found := st.WebhookTarget(wh); !found {
		err = apiError(projections.ENotFound, "", "no webhook %q", wh)
	} else {
		plan, err = dp.PlanReplay(t, win)
	}
	if errors.Is(err, delivery.ErrBadAfter) {
		err = apiError(projections.EInvalid, "after", "after must be the next value of a previous %s answer", mode)
	}
	if err != nil {
		return nil, err
	}
	return st.RequestRedelivery(ctx, pr, wh, mode, plan.DeliveryIDs, plan.Seqs, plan.Answer, idem)
}

func (s *Server) handleGetDelivery(w http.ResponseWriter, r *http.Request) {
	wh, id := param(w, "id"), param(w, "delivery_id")
	if !s.deliveriesOf(w, r, wh) {
		return
	}
	d, err := s.deps.Deliveries.Detail(wh, id)
	if errors.Is(err, delivery.ErrNoDelivery) {
		err = apiError(projections.ENotFound, "", "no delivery %q of webhook %s", id, wh)
	}
	s.respond(w, r, http.StatusOK, d, err)
}

// deliveryFilter reads the filters of the attempt log's list.
func deliveryFilter(q listQuery) (delivery.Filter, error) {
	f := delivery.Filter{Status: q.Filters["status"], Event: q.Filters["event"]}
	switch f.Status {
	case "", delivery.StatusPending, delivery.StatusSucceeded, delivery.StatusFailed:
	default:
		return f, apiError(projections.EInvalid, "status", "status must be pending, succeeded or failed")
	}
	if events := append(projections.WebhookEventNames(), "webhook.test"); f.Event != "" && !slices.Contains(events, f.Event) {
		// The list is the server's own: part of the format, not an
		// argument, which would be clipped as a request's value is.
		return f, apiError(projections.EInvalid, "event", "event must be one of "+strings.Join(events, ", ")+", got %q", f.Event)
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v, ok := q.Filters[p.name]; ok {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, apiError(projections.EInvalid, p.name, "%s must be an RFC 3339 timestamp such as 2026-11-21T15:00:00Z", p.name)
			}
			*p.to = t
		}
	}
	return f, nil
}
