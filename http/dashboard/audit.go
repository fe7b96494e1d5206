package dashboard

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
)

// actorName is who caused an event, as the audit log names them.
type actorName struct {
	ID    string // usr_…, key_…, cli, delivery
	Kind  string // user, key, or other
	Label string // a user's e-mail, a key's last four characters
}

// actorIndex names the actors of one account: its users and keys.
type actorIndex struct {
	users map[string]string
	keys  map[string]string
}

func (db *Dashboard) actorNames(account string) actorIndex {
	ix := actorIndex{users: map[string]string{}, keys: map[string]string{}}
	for _, u := range db.deps.State.Users(account) {
		ix.users[u.ID] = u.Email
	}
	for _, k := range db.deps.State.Keys(account) {
		ix.keys[k.ID] = k.Last4
	}
	return ix
}

func (ix actorIndex) of(id string) actorName {
	if e, ok := ix.users[id]; ok {
		return actorName{ID: id, Kind: "user", Label: e}
	}
	if l, ok := ix.keys[id]; ok {
		return actorName{ID: id, Kind: "key", Label: l}
	}
	return actorName{ID: id, Kind: "other"}
}

// subject is what an event is about, with the page that shows it.
type subject struct {
	Kind, ID, Link string
}

// subjectOf reads the subject of a record from its payload: the entity
// its type is named after.
func subjectOf(rec *eventlog.JSONRecord) subject {
	var data map[string]any
	_ = json.Unmarshal(rec.Data, &data)
	str := func(k string) string { s, _ := data[k].(string); return s }
	typ := rec.Type
	switch {
	case strings.HasPrefix(typ, "session.") || typ == projections.TypeLeadHot || typ == projections.TypeMeetingBooked:
		return subject{"session", str("session_id"), "/sessions/" + url.PathEscape(str("session_id"))}
	case strings.HasPrefix(typ, "agent."):
		return subject{"agent", str("agent_id"), "/agents/" + url.PathEscape(str("agent_id"))}
	case typ == projections.TypeContactCreated:
		return subject{"contact", str("contact_id"), "/contacts/" + url.PathEscape(str("contact_id"))}
	case strings.HasPrefix(typ, "api_key."):
		return subject{"API key", str("key_id"), "/settings/api-keys"}
	case strings.HasPrefix(typ, "webhook."):
		id := str("webhook_id")
		if typ == projections.TypeWebhookDeleted {
			return subject{"webhook", id, ""} // its page went with it
		}
		return subject{"webhook", id, "/webhooks/" + url.PathEscape(id)}
	case strings.HasPrefix(typ, "user."):
		return subject{"user", str("user_id"), "/settings/users"}
	case typ == projections.TypeAccountCreated:
		return subject{"account", rec.AccountID, "/settings/account"}
	}
	return subject{}
}

// auditTypes are the event types the audit filter offers.
var auditTypes = []string{
	projections.TypeAccountCreated, projections.TypeAPIKeyCreated, projections.TypeAPIKeyRevoked,
	projections.TypeAgentCreated, projections.TypeAgentUpdated, projections.TypeContactCreated,
	projections.TypeSessionStarted, projections.TypeSessionProgressed, projections.TypeLeadHot,
	projections.TypeSessionCompleted, projections.TypeSessionAbandoned, projections.TypeMeetingBooked,
	projections.TypeWebhookRegistered, projections.TypeWebhookDeleted, projections.TypeWebhookDisabled,
	projections.TypeUserCreated, projections.TypeUserSetupIssued, projections.TypeUserPasswordSet,
	projections.TypeUserSignedIn, projections.TypeUserSignedOut, projections.TypeUserDisabled,
}

type auditRow struct {
	Rec     *eventlog.JSONRecord
	Data    string
	Actor   actorName
	Subject subject
}

type auditData struct {
	Rows      []auditRow
	Types     []string
	Type      string
	Actor     string
	From, To  string
	NextURL   string
	Searched  int
	Partial   bool
	Verified  uint64
	Head      uint64
	Damage    string
	Known     bool // the verification's status is known
	ExportURL string
}

// auditPerPage is the length of one page of /audit.
const auditPerPage = 50

// handleAudit lists the account's events from the log, newest first,
// with filters; the work is bounded by the page and searchBudget records.
func (db *Dashboard) handleAudit(w http.ResponseWriter, r *http.Request, c *caller) {
	qs := r.URL.Query()
	d := auditData{Types: auditTypes, Type: qs.Get("type"), Actor: strings.TrimSpace(qs.Get("actor")), From: qs.Get("from"), To: qs.Get("to"),
		ExportURL: "/audit/export"}
	if db.deps.Health != nil {
		d.Known = true
		d.Verified, d.Head, d.Damage = db.deps.Health.ChainStatus()
	}
	from, okFrom := parseDay(d.From)
	to, okTo := parseDay(d.To)
	before, err := strconv.ParseUint(qs.Get("before"), 10, 64)
	if qs.Get("before") == "" {
		before, err = 0, nil
	}
	if !okFrom || !okTo || err != nil || (d.Type != "" && !slices.Contains(auditTypes, d.Type)) {
		db.render(w, r, http.StatusBadRequest, "audit", view{Title: "Audit log", Section: "audit", Data: d,
			Error: "These filters cannot be read: dates are YYYY-MM-DD, the type one of the list."})
		return
	}
	if !to.IsZero() {
		last, err := db.deps.State.AccountSeqAt(c.Account.ID, to.Add(24*time.Hour-time.Nanosecond))
		if err != nil {
			db.failed(w, r, err)
			return
		}
		if before == 0 || last+1 < before {
			before = last + 1
		}
		if last == 0 {
			before = 1 // nothing that early
		}
	}
	names := db.actorNames(c.Account.ID)
	examined := 0
	var last uint64
	done := false
	for !done && len(d.Rows) < auditPerPage && (before == 0 || before > 1) {
		seqs := db.deps.State.AccountEventSeqs(c.Account.ID, before, 256)
		if len(seqs) == 0 {
			break
		}
		slices.Reverse(seqs) // one read for a run of seqs
		var recs []*eventlog.JSONRecord
		if err := db.deps.State.Records(c.Account.ID, seqs, func(rec *eventlog.JSONRecord) bool {
			recs = append(recs, rec)
			return true
		}); err != nil {
			db.failed(w, r, err)
			return
		}
		for _, rec := range slices.Backward(recs) {
			if !from.IsZero() && rec.Time.Before(from) {
				done, last = true, 0
				break
			}
			last = rec.Seq
			if (d.Type == "" || rec.Type == d.Type) && (d.Actor == "" || rec.Actor == d.Actor) {
				d.Rows = append(d.Rows, auditRow{Rec: rec, Data: indent(rec.Data), Actor: names.of(rec.Actor), Subject: subjectOf(rec)})
				if len(d.Rows) == auditPerPage {
					break
				}
				continue
			}
			if examined++; examined >= searchBudget {
				d.Partial = true
				done = true
				break
			}
		}
		before = seqs[0]
	}
	d.Searched = examined
	if last > 1 && (len(d.Rows) == auditPerPage || d.Partial) {
		v := url.Values{"before": {strconv.FormatUint(last, 10)}}
		for k, s := range map[string]string{"type": d.Type, "actor": d.Actor, "from": d.From} {
			if s != "" {
				v.Set(k, s)
			}
		}
		d.NextURL = "/audit?" + v.Encode()
	}
	db.render(w, r, http.StatusOK, "audit", view{Title: "Audit log", Section: "audit", Data: d})
}

// handleAuditExport streams every event of the caller's account as JSON
// lines, oldest first, as `demosvc log` prints them (sealed values as
// "[sealed]") with each record's hash, so the chain can be checked against
// the server's. It reads the account's own index: no other account's
// record is read into the answer.
func (db *Dashboard) handleAuditExport(w http.ResponseWriter, r *http.Request, c *caller) {
	h := w.Header()
	h.Set("Content-Type", "application/jsonl; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+c.Account.ID+`-events.jsonl"`)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	var after uint64
	for {
		seqs := db.deps.State.AccountEventsAfter(c.Account.ID, after, 1024)
		if len(seqs) == 0 {
			return
		}
		err := db.deps.State.Records(c.Account.ID, seqs, func(rec *eventlog.JSONRecord) bool {
			return enc.Encode(rec) == nil && r.Context().Err() == nil
		})
		if err != nil || r.Context().Err() != nil {
			db.deps.Logger.Warn("dashboard: audit export stopped", "account_id", c.Account.ID, "err", err)
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		after = seqs[len(seqs)-1]
	}
}
