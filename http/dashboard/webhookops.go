package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"demosvc/delivery"
	demohttp "demosvc/http"
	"demosvc/projections"
)

// Buttons of the webhook page for issue 12's operations: pause and
// resume, edit, rotate the secret, send a test event, recover and replay.
// Each calls the function the API's handler calls (projections'
// UpdateWebhook and RotateWebhookSecret, demohttp.SendTest and
// demohttp.Redeliver), with the signed-in user as the actor.

// opsWait bounds how long a button waits for its command.
const opsWait = 10 * time.Second

// webhookOf is the caller's webhook of the request's {id}, or a 404 page.
func (db *Dashboard) webhookOf(w http.ResponseWriter, r *http.Request, c *caller) (projections.WebhookView, bool) {
	wh, err := db.deps.State.Webhook(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return wh, false
	}
	if err := r.ParseForm(); err != nil {
		db.errorPage(w, r, http.StatusBadRequest, "This form could not be read.")
		return wh, false
	}
	return wh, true
}

// opFailed answers an error of an operation; the API layer's own
// refusals (a bad window, a bad continuation) are shown like the domain's.
func (db *Dashboard) opFailed(w http.ResponseWriter, r *http.Request, err error) {
	var eo *demohttp.ErrorObject
	if errors.As(err, &eo) {
		status := http.StatusConflict
		if eo.Code == projections.ENotFound {
			status = http.StatusNotFound
		}
		db.errorPage(w, r, status, "Refused: "+eo.Message+".")
		return
	}
	db.failed(w, r, err)
}

func webhookPage(id string) string { return "/webhooks/" + url.PathEscape(id) }

// handleWebhookStatus pauses (status disabled) or resumes (enabled, with
// skip_backlog to drop what arrived meanwhile) a webhook, as PATCH does.
func (db *Dashboard) handleWebhookStatus(w http.ResponseWriter, r *http.Request, c *caller) {
	wh, ok := db.webhookOf(w, r, c)
	if !ok {
		return
	}
	status := r.PostForm.Get("status")
	patch := projections.WebhookPatch{Status: &status, SkipBacklog: status == "enabled" && r.PostForm.Get("skip_backlog") != ""}
	ctx, cancel := contextWithTimeout(r, opsWait)
	defer cancel()
	if _, err := db.deps.State.UpdateWebhook(ctx, c.principal(), wh.ID, patch); err != nil {
		db.failed(w, r, err)
		return
	}
	http.Redirect(w, r, webhookPage(wh.ID), http.StatusSeeOther)
}

type webhookEditForm struct {
	W         projections.WebhookView
	URL       string
	Events    map[string]bool
	Names     []string
	RateLimit string
}

func (db *Dashboard) handleEditWebhookForm(w http.ResponseWriter, r *http.Request, c *caller) {
	wh, err := db.deps.State.Webhook(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return
	}
	f := webhookEditForm{W: wh, URL: wh.URL, Events: map[string]bool{}, Names: projections.WebhookEventNames(),
		RateLimit: strconv.Itoa(wh.RateLimitPerSecond)}
	for _, e := range wh.Events {
		f.Events[e] = true
	}
	db.render(w, r, http.StatusOK, "webhook_edit", view{Title: "Edit webhook", Section: "webhooks", Data: f})
}

// handleEditWebhook changes URL, events and rate limit with PATCH's
// command; a refused field is shown beside it with the API's message.
func (db *Dashboard) handleEditWebhook(w http.ResponseWriter, r *http.Request, c *caller) {
	wh, ok := db.webhookOf(w, r, c)
	if !ok {
		return
	}
	f := webhookEditForm{W: wh, URL: r.PostForm.Get("url"), Events: map[string]bool{}, Names: projections.WebhookEventNames(),
		RateLimit: strings.TrimSpace(r.PostForm.Get("rate_limit_per_second"))}
	events := append([]string{}, r.PostForm["events"]...)
	for _, e := range events {
		f.Events[e] = true
	}
	fields := map[string]string{}
	patch := projections.WebhookPatch{URL: &f.URL, Events: events}
	if f.RateLimit == "" {
		f.RateLimit = "0"
	}
	if n, err := strconv.Atoi(f.RateLimit); err != nil {
		fields["rate_limit_per_second"] = "must be a whole number of deliveries per second (0: no limit)"
	} else {
		patch.RateLimitPerSecond = &n
	}
	if len(fields) == 0 {
		ctx, cancel := contextWithTimeout(r, opsWait)
		defer cancel()
		_, err := db.deps.State.UpdateWebhook(ctx, c.principal(), wh.ID, patch)
		if err == nil {
			http.Redirect(w, r, webhookPage(wh.ID), http.StatusSeeOther)
			return
		}
		if !fieldError(err, fields) {
			db.failed(w, r, err)
			return
		}
	}
	db.render(w, r, http.StatusUnprocessableEntity, "webhook_edit", view{Title: "Edit webhook", Section: "webhooks", Data: f, Fields: fields})
}

// overlapChoices are the rotation overlaps offered, in seconds.
var overlapChoices = map[string]bool{"0": true, "3600": true, "86400": true, "604800": true}

type webhookOpResult struct {
	W projections.WebhookView
	// Rotated is the webhook with its new secret: shown once.
	Rotated *projections.WebhookView
	// Mode is "recover" or "replay" for a redelivery's answer.
	Mode   string
	Answer projections.RedeliveryAnswer
	Since  string
	Until  string
}

// handleRotateSecret rotates the signing secret with the API's command and
// shows the new one once, on this answer (never cached: no-store).
func (db *Dashboard) handleRotateSecret(w http.ResponseWriter, r *http.Request, c *caller) {
	wh, ok := db.webhookOf(w, r, c)
	if !ok {
		return
	}
	choice := r.PostForm.Get("previous_expires_in")
	if choice == "" {
		choice = strconv.Itoa(projections.DefaultPreviousSecretSeconds)
	}
	if !overlapChoices[choice] {
		db.errorPage(w, r, http.StatusUnprocessableEntity, "Choose an overlap of none, 1 hour, 24 hours or 7 days.")
		return
	}
	secs, _ := strconv.Atoi(choice)
	ctx, cancel := contextWithTimeout(r, opsWait)
	defer cancel()
	v, err := db.deps.State.RotateWebhookSecret(ctx, c.principal(), wh.ID, secs, nil)
	if err != nil {
		db.failed(w, r, err)
		return
	}
	rotated := v.(projections.WebhookView)
	db.render(w, r, http.StatusOK, "webhook_op", view{Title: "Secret rotated", Section: "webhooks",
		Data: webhookOpResult{W: wh, Rotated: &rotated}})
}

// handleTestWebhook sends a webhook.test event through the normal path
// and goes back to the attempt log, where its delivery is.
func (db *Dashboard) handleTestWebhook(w http.ResponseWriter, r *http.Request, c *caller) {
	wh, ok := db.webhookOf(w, r, c)
	if !ok || !db.sendable(w, r, c, wh.ID) {
		return
	}
	ctx, cancel := contextWithTimeout(r, opsWait)
	defer cancel()
	v, err := db.deps.Deliveries.SendTest(ctx, c.principal(), wh.ID, r.PostForm.Get("message"), nil)
	if err != nil {
		db.opFailed(w, r, err)
		return
	}
	target := webhookPage(wh.ID)
	if d, ok := v.(delivery.Delivery); ok {
		target += "#" + url.PathEscape(d.ID)
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// sendable answers false, with a page saying why, when wh cannot be sent
// to: a disabled webhook, or no deliveries in this process.
func (db *Dashboard) sendable(w http.ResponseWriter, r *http.Request, c *caller, wh string) bool {
	if err := db.deps.State.WebhookSendable(c.Account.ID, wh); err != nil {
		db.failed(w, r, err)
		return false
	}
	if db.deps.Deliveries == nil {
		db.errorPage(w, r, http.StatusServiceUnavailable, "Deliveries are not served by this process.")
		return false
	}
	return true
}

// handleRedeliver recovers the failed deliveries of a window, or replays
// the events since a time, as the API does: one bounded call, its count
// shown, with a button to continue when there is more.
func (db *Dashboard) handleRedeliver(mode string) func(http.ResponseWriter, *http.Request, *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		wh, ok := db.webhookOf(w, r, c)
		if !ok {
			return
		}
		res := webhookOpResult{W: wh, Mode: mode, Since: strings.TrimSpace(r.PostForm.Get("since")),
			Until: strings.TrimSpace(r.PostForm.Get("until"))}
		if mode == projections.RedeliverReplay {
			res.Until = ""
		}
		win, err := demohttp.ParseWindow(res.Since, res.Until, r.PostForm.Get("after"))
		if err != nil {
			db.opFailed(w, r, err)
			return
		}
		if !db.sendable(w, r, c, wh.ID) {
			return
		}
		ctx, cancel := contextWithTimeout(r, opsWait)
		defer cancel()
		v, err := demohttp.Redeliver(ctx, db.deps.State, db.deps.Deliveries, c.principal(), wh.ID, mode, win, nil)
		if err != nil {
			db.opFailed(w, r, err)
			return
		}
		res.Answer, _ = v.(projections.RedeliveryAnswer)
		title := "Recovered"
		if mode == projections.RedeliverReplay {
			title = "Replayed"
		}
		db.render(w, r, http.StatusOK, "webhook_op", view{Title: title, Section: "webhooks", Data: res})
	}
}
