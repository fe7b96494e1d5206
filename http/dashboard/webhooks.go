package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"demosvc/delivery"
	"demosvc/projections"
)

// Webhook pages: the list with each webhook's last outcome and success
// rate over 24 h, registration (the secret shown once), and one webhook's
// attempt log with its hourly outcomes, per-delivery retry and delete. The
// figures come from the delivery store's hourly counts and the newest
// delivery: a few reads per webhook, whatever it has sent.

type webhookRow struct {
	projections.WebhookView
	Last     *delivery.Delivery // the newest delivery, if any
	Day      delivery.Outcomes  // attempts over the last 24 hours
	Rate     string             // successful attempts over 24 h, "—" with none
	HasStats bool
}

type webhooksData struct {
	Rows      []webhookRow
	Available bool // deliveries are served by this process
}

// outcomes24h sums the last 24 hours of a webhook's attempts.
func (db *Dashboard) outcomes24h(wh string) ([]delivery.HourOutcomes, delivery.Outcomes, error) {
	hours, err := db.deps.Deliveries.Hourly(wh, db.deps.Clock(), 24)
	var sum delivery.Outcomes
	for _, h := range hours {
		sum.Succeeded += h.Succeeded
		sum.Retrying += h.Retrying
		sum.Failed += h.Failed
	}
	return hours, sum, err
}

func (db *Dashboard) handleWebhooks(w http.ResponseWriter, r *http.Request, c *caller) {
	pg, err := db.deps.State.Webhooks(c.Account.ID, projections.ListQuery{Limit: 1000})
	if err != nil {
		db.failed(w, r, err)
		return
	}
	d := webhooksData{Available: db.deps.Deliveries != nil}
	for _, wh := range pg.Data {
		row := webhookRow{WebhookView: wh, Rate: "—"}
		if d.Available {
			if ds, _, _, err := db.deps.Deliveries.SearchDeliveries(wh.ID, 1, "", delivery.Filter{}); err == nil && len(ds) == 1 {
				row.Last = &ds[0]
			}
			if _, sum, err := db.outcomes24h(wh.ID); err == nil {
				row.Day, row.HasStats = sum, true
				if n := sum.Attempts(); n > 0 {
					row.Rate = percent(sum.Succeeded, n)
				}
			}
		}
		d.Rows = append(d.Rows, row)
	}
	db.render(w, r, http.StatusOK, "webhooks", view{Title: "Webhooks", Section: "webhooks", Data: d})
}

type webhookForm struct {
	URL    string
	Events map[string]bool
	Names  []string
	// Created is the webhook just registered, with its secret: shown once.
	Created *projections.WebhookView
}

func (db *Dashboard) handleNewWebhookForm(w http.ResponseWriter, r *http.Request, c *caller) {
	db.render(w, r, http.StatusOK, "webhook_new", view{Title: "New webhook", Section: "webhooks",
		Data: webhookForm{Events: map[string]bool{}, Names: projections.WebhookEventNames()}})
}

// handleCreateWebhook registers a webhook with the API's command and shows
// its signing secret once, on this answer (never cached: no-store).
func (db *Dashboard) handleCreateWebhook(w http.ResponseWriter, r *http.Request, c *caller) {
	if err := r.ParseForm(); err != nil {
		db.errorPage(w, r, http.StatusBadRequest, "This form could not be read.")
		return
	}
	f := webhookForm{URL: r.PostForm.Get("url"), Events: map[string]bool{}, Names: projections.WebhookEventNames()}
	events := r.PostForm["events"]
	for _, e := range events {
		f.Events[e] = true
	}
	v, err := db.deps.State.RegisterWebhook(r.Context(), c.principal(), projections.WebhookInput{URL: f.URL, Events: events}, nil)
	if err != nil {
		fields := map[string]string{}
		if !fieldError(err, fields) {
			db.failed(w, r, err)
			return
		}
		db.render(w, r, http.StatusUnprocessableEntity, "webhook_new", view{Title: "New webhook", Section: "webhooks", Data: f, Fields: fields})
		return
	}
	created := v.(projections.WebhookView)
	f.Created = &created
	db.render(w, r, http.StatusCreated, "webhook_new", view{Title: "Webhook registered", Section: "webhooks", Data: f})
}

// deliveriesPerPage is the length of one page of a webhook's attempt log.
const deliveriesPerPage = 25

type webhookData struct {
	W         projections.WebhookView
	Available bool
	Chart     chart
	Day       delivery.Outcomes
	Rate      string
	Rows      []delivery.DeliveryDetail // with their attempts
	Status    string
	Event     string
	Names     []string
	NextURL   string
	Partial   bool
	// DaySince prefills the recover and replay windows: the last 24 h
	// (an empty until is now).
	DaySince string
}

// handleWebhook shows one webhook: its attempt log (newest first, by
// status and event), each delivery with its attempts, and its attempts
// per hour over 24 h.
func (db *Dashboard) handleWebhook(w http.ResponseWriter, r *http.Request, c *caller) {
	wh, err := db.deps.State.Webhook(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return
	}
	qs := r.URL.Query()
	d := webhookData{W: wh, Available: db.deps.Deliveries != nil, Status: qs.Get("status"), Event: qs.Get("event"),
		Names: projections.WebhookEventNames(), Rate: "—"}
	now := db.deps.Clock().UTC().Truncate(time.Second)
	d.DaySince = now.Add(-24 * time.Hour).Format(time.RFC3339)
	if !d.Available {
		db.render(w, r, http.StatusOK, "webhook", view{Title: "Webhook " + wh.ID, Section: "webhooks", Data: d})
		return
	}
	hours, sum, err := db.outcomes24h(wh.ID)
	if err != nil {
		db.failed(w, r, err)
		return
	}
	d.Day = sum
	if n := sum.Attempts(); n > 0 {
		d.Rate = percent(sum.Succeeded, n)
	}
	labels := make([]string, len(hours))
	values := make([][]int, len(hours))
	for i, h := range hours {
		labels[i] = h.Hour.Format("15:04")
		values[i] = []int{h.Succeeded, h.Retrying, h.Failed}
	}
	d.Chart = newChart("per-hour", "Attempts per hour by outcome, last 24 hours",
		"Succeeded (solid), failed with a retry scheduled (striped), failed for good (dotted), by UTC hour.", "Hour (UTC)",
		seriesOf("per-hour", "succeeded", "failed, will retry", "failed"), labels, values, 3)
	after := qs.Get("after")
	if after != "" {
		if _, err := db.deps.Deliveries.Delivery(wh.ID, after); err != nil {
			db.errorPage(w, r, http.StatusBadRequest, "This page of the attempt log does not exist.")
			return
		}
	}
	rows, next, partial, err := db.deps.Deliveries.SearchDeliveries(wh.ID, deliveriesPerPage, after,
		delivery.Filter{Status: d.Status, Event: d.Event, Budget: searchBudget})
	if err != nil {
		db.failed(w, r, err)
		return
	}
	d.Partial = partial
	for _, row := range rows { // one short read per delivery shown
		detail, err := db.deps.Deliveries.Detail(wh.ID, row.ID)
		if err != nil {
			db.failed(w, r, err)
			return
		}
		d.Rows = append(d.Rows, detail)
	}
	if next != "" {
		v := url.Values{"after": {next}}
		if d.Status != "" {
			v.Set("status", d.Status)
		}
		if d.Event != "" {
			v.Set("event", d.Event)
		}
		d.NextURL = "/webhooks/" + url.PathEscape(wh.ID) + "?" + v.Encode()
	}
	db.render(w, r, http.StatusOK, "webhook", view{Title: "Webhook " + wh.ID, Section: "webhooks", Data: d})
}

func (db *Dashboard) handleDeleteWebhookForm(w http.ResponseWriter, r *http.Request, c *caller) {
	wh, err := db.deps.State.Webhook(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return
	}
	db.render(w, r, http.StatusOK, "webhook_delete", view{Title: "Delete webhook", Section: "webhooks", Data: wh})
}

// handleDeleteWebhook deletes with the API's command: nothing more is sent.
func (db *Dashboard) handleDeleteWebhook(w http.ResponseWriter, r *http.Request, c *caller) {
	if err := db.deps.State.DeleteWebhook(r.Context(), c.principal(), r.PathValue("id")); err != nil {
		db.failed(w, r, err)
		return
	}
	http.Redirect(w, r, "/webhooks", http.StatusSeeOther)
}

// retryWait bounds how long a retry from the page waits for the webhook's
// delivery loop to take it.
const retryWait = 10 * time.Second

// handleRetryDelivery sends a failed delivery again, as the API's retry
// does, then goes back to the attempt log.
func (db *Dashboard) handleRetryDelivery(w http.ResponseWriter, r *http.Request, c *caller) {
	wh, err := db.deps.State.Webhook(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return
	}
	if db.deps.Deliveries == nil {
		db.errorPage(w, r, http.StatusServiceUnavailable, "Deliveries are not served by this process.")
		return
	}
	if err := db.deps.State.WebhookSendable(c.Account.ID, wh.ID); err != nil {
		db.failed(w, r, err) // disabled: enable it first
		return
	}
	ctx, cancel := contextWithTimeout(r, retryWait)
	defer cancel()
	_, err = db.deps.Deliveries.Retry(ctx, wh.ID, r.PathValue("dlv"))
	switch {
	case errors.Is(err, delivery.ErrNotRunning):
		db.errorPage(w, r, http.StatusServiceUnavailable, "This webhook's deliveries are starting or stopping. Try again in a moment.")
		return
	case errors.Is(err, delivery.ErrNoDelivery):
		db.errorPage(w, r, http.StatusNotFound, "This webhook has no such delivery.")
		return
	case errors.Is(err, delivery.ErrNotFailed):
		db.errorPage(w, r, http.StatusConflict, "Only a failed delivery can be retried; this one is pending or succeeded.")
		return
	case err != nil:
		db.failed(w, r, err)
		return
	}
	http.Redirect(w, r, "/webhooks/"+url.PathEscape(wh.ID)+"#"+url.PathEscape(r.PathValue("dlv")), http.StatusSeeOther)
}
