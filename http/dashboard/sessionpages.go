package dashboard

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"demosvc/delivery"
	"demosvc/eventlog"
	"demosvc/projections"
)

// sessionsPerPage is the length of one page of /sessions; searchBudget
// bounds the sessions (or contacts, deliveries, events) a filtered page
// examines beyond what it shows, after which it offers to search on.
const (
	sessionsPerPage = 25
	searchBudget    = 5000
)

type sessionsData struct {
	Page    projections.RowPage[projections.SessionRow]
	Agents  []projections.AgentView // for the agent filter: the newest 100
	Q       sessionFilterForm
	NextURL string
}

// sessionFilterForm is the filter form as typed.
type sessionFilterForm struct {
	Agent, Status, Contact, From, To string
	Hot                              bool
}

func (f sessionFilterForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"agent": f.Agent, "status": f.Status, "contact": f.Contact, "from": f.From, "to": f.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.Hot {
		v.Set("hot", "1")
	}
	return v
}

// parseDay reads a date field (YYYY-MM-DD, UTC); "" is no bound.
func parseDay(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.DateOnly, s)
	return t, err == nil
}

// handleSessions lists the account's sessions, newest first, with filters.
func (db *Dashboard) handleSessions(w http.ResponseWriter, r *http.Request, c *caller) {
	qs := r.URL.Query()
	f := sessionFilterForm{Agent: qs.Get("agent"), Status: qs.Get("status"), Contact: strings.TrimSpace(qs.Get("contact")),
		From: qs.Get("from"), To: qs.Get("to"), Hot: qs.Get("hot") == "1"}
	d := sessionsData{Q: f}
	if ag, err := db.deps.State.Agents(c.Account.ID, projections.ListQuery{Limit: 100}, ""); err == nil {
		d.Agents = ag.Data
	}
	q := projections.SessionQuery{SessionFilter: projections.SessionFilter{AgentID: f.Agent, Status: f.Status},
		HotOnly: f.Hot, After: qs.Get("after"), Limit: sessionsPerPage, Budget: searchBudget}
	from, okFrom := parseDay(f.From)
	to, okTo := parseDay(f.To)
	if !okFrom || !okTo {
		db.render(w, r, http.StatusBadRequest, "sessions", view{Title: "Sessions", Section: "sessions", Data: d,
			Error: "Dates are written YYYY-MM-DD."})
		return
	}
	q.From = from
	if !to.IsZero() {
		q.To = to.Add(24*time.Hour - time.Second) // the whole day
	}
	if f.Contact != "" {
		q.ContactID = f.Contact
		if strings.Contains(f.Contact, "@") {
			// An e-mail: its contact, if the account has one. One lookup:
			// a search would examine every contact of the account, with
			// the state read-locked, for an address it does not have.
			cs, _ := db.deps.State.ContactRows(c.Account.ID, projections.ContactQuery{Search: f.Contact, Limit: 1, Exact: true})
			q.ContactID = "cnt_none"
			if len(cs.Rows) == 1 && strings.EqualFold(cs.Rows[0].Email, f.Contact) {
				q.ContactID = cs.Rows[0].ID
			}
		}
	}
	pg, err := db.deps.State.SessionRows(c.Account.ID, q)
	if err != nil {
		db.render(w, r, http.StatusBadRequest, "sessions", view{Title: "Sessions", Section: "sessions", Data: d,
			Error: "This list cannot be shown: " + errorMessage(err) + "."})
		return
	}
	d.Page = pg
	if pg.Next != "" {
		v := f.values()
		v.Set("after", pg.Next)
		d.NextURL = "/sessions?" + v.Encode()
	}
	db.render(w, r, http.StatusOK, "sessions", view{Title: "Sessions", Section: "sessions", Data: d})
}

// timelineEvent is one record of a session's timeline with the deliveries
// it caused.
type timelineEvent struct {
	Rec        *eventlog.JSONRecord
	Data       string // the payload, indented
	Actor      actorName
	Deliveries []timelineDelivery
}

type timelineDelivery struct {
	WebhookID, WebhookURL string
	delivery.Delivery
}

type sessionData struct {
	S        projections.SessionRow
	Meters   []meter
	Timeline []timelineEvent
	// Webhooks are the account's webhooks now: deliveries to deleted ones
	// are gone with them.
	Webhooks int
}

// handleSession shows one session: every field, its signals, its replay and
// meeting, and its timeline from the log with the deliveries each event
// caused. The work is the session's own events (at most 200) times the
// account's webhooks (at most webhooks.max_per_account).
func (db *Dashboard) handleSession(w http.ResponseWriter, r *http.Request, c *caller) {
	s, err := db.deps.State.SessionRowOf(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return
	}
	seqs, err := db.deps.State.SessionTimeline(c.Account.ID, s.ID)
	if err != nil {
		db.failed(w, r, err)
		return
	}
	d := sessionData{S: s, Meters: []meter{newMeter("Intent score", s.IntentScore), newMeter("Interest", s.Signals.Interest),
		newMeter("Objections", s.Signals.Objections), newMeter("Buying signals", s.Signals.BuyingSignals)}}
	hooks, _ := db.deps.State.Webhooks(c.Account.ID, projections.ListQuery{Limit: 1000})
	d.Webhooks = len(hooks.Data)
	names := db.actorNames(c.Account.ID)
	err = db.deps.State.Records(c.Account.ID, seqs, func(rec *eventlog.JSONRecord) bool {
		ev := timelineEvent{Rec: rec, Data: indent(rec.Data), Actor: names.of(rec.Actor)}
		if db.deps.Deliveries != nil {
			for _, wh := range hooks.Data {
				ds, err := db.deps.Deliveries.DeliveriesOfEvent(wh.ID, rec.Seq)
				if err != nil {
					db.deps.Logger.Warn("dashboard: reading deliveries", "webhook_id", wh.ID, "err", err)
					continue
				}
				for _, dl := range ds {
					ev.Deliveries = append(ev.Deliveries, timelineDelivery{WebhookID: wh.ID, WebhookURL: wh.URL, Delivery: dl})
				}
			}
		}
		d.Timeline = append(d.Timeline, ev)
		return true
	})
	if err != nil {
		db.failed(w, r, err)
		return
	}
	db.render(w, r, http.StatusOK, "session", view{Title: "Session " + s.ID, Section: "sessions", Data: d})
}

// indent renders a record's payload for people.
func indent(raw json.RawMessage) string {
	var b strings.Builder
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // html/template escapes it for the page
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}
