package http

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"demosvc/delivery"
	"demosvc/projections"
)

// Every handler has the same shape: decode, validate, call, respond.

func (s *Server) handleCreateAgent(w http.ResponseWriter, r *http.Request) {
	var in projections.AgentInput
	body, ok := s.decodeBody(w, r, &in)
	if !ok {
		return
	}
	idem, ok := s.idempotency(w, r, body, http.StatusCreated)
	if !ok {
		return
	}
	v, err := s.deps.State.CreateAgent(r.Context(), principal(w), in, idem)
	s.respond(w, r, http.StatusCreated, v, err)
}

func (s *Server) handleListAgents(w http.ResponseWriter, r *http.Request) {
	q, ok := s.listQuery(w, r, listSpec{projections.PrefixAgent, []string{"status"}})
	if !ok {
		return
	}
	page, err := s.deps.State.Agents(principal(w).Account.ID, q.ListQuery, q.Filters["status"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writePage(w, r, q, page, func(v projections.AgentView) string { return v.ID })
}

func (s *Server) handleGetAgent(w http.ResponseWriter, r *http.Request) {
	v, err := s.deps.State.Agent(principal(w).Account.ID, param(w, "id"))
	s.respond(w, r, http.StatusOK, v, err)
}

// agentPatch is the body of PATCH /v1/agents/{id}: a field left out is
// nil. A null is refused by decodeBody, as in every body of the API.
type agentPatch struct {
	Name       *string `json:"name"`
	SandboxURL *string `json:"sandbox_url"`
	Persona    *string `json:"persona"`
	Status     *string `json:"status"`
}

func (s *Server) handleUpdateAgent(w http.ResponseWriter, r *http.Request) {
	var in agentPatch
	if _, ok := s.decodeBody(w, r, &in); !ok {
		return
	}
	patch := projections.AgentPatch{Name: in.Name, SandboxURL: in.SandboxURL, Persona: in.Persona, Status: in.Status}
	v, err := s.deps.State.UpdateAgent(r.Context(), principal(w), param(w, "id"), patch)
	s.respond(w, r, http.StatusOK, v, err)
}

func (s *Server) handleStartSession(w http.ResponseWriter, r *http.Request) {
	var in projections.SessionInput
	body, ok := s.decodeBody(w, r, &in)
	if !ok {
		return
	}
	idem, ok := s.idempotency(w, r, body, http.StatusCreated)
	if !ok {
		return
	}
	v, err := s.deps.State.StartSession(r.Context(), principal(w), in, idem)
	s.respond(w, r, http.StatusCreated, v, err)
	projections.ReleaseAnswer(v)
}

// sessionAction handles the POST /v1/sessions/{id}/… actions that take
// figures.
func (s *Server) sessionAction(act func(p *projections.Projections, ctx context.Context, pr projections.Principal, id string, f projections.Figures, idem *projections.Idempotency) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var f projections.Figures
		body, ok := s.decodeBody(w, r, &f)
		if !ok {
			return
		}
		idem, ok := s.idempotency(w, r, body, http.StatusOK)
		if !ok {
			return
		}
		v, err := act(s.deps.State, r.Context(), principal(w), param(w, "id"), f, idem)
		s.respond(w, r, http.StatusOK, v, err)
		projections.ReleaseAnswer(v)
	}
}

func (s *Server) handleBookMeeting(w http.ResponseWriter, r *http.Request) {
	var in projections.MeetingInput
	body, ok := s.decodeBody(w, r, &in)
	if !ok {
		return
	}
	idem, ok := s.idempotency(w, r, body, http.StatusOK)
	if !ok {
		return
	}
	v, err := s.deps.State.BookMeeting(r.Context(), principal(w), param(w, "id"), in, idem)
	s.respond(w, r, http.StatusOK, v, err)
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	q, ok := s.listQuery(w, r, listSpec{projections.PrefixSession, []string{"agent_id", "status", "contact_id"}})
	if !ok {
		return
	}
	f := projections.SessionFilter{AgentID: q.Filters["agent_id"], ContactID: q.Filters["contact_id"], Status: q.Filters["status"]}
	// An id of the wrong form is a mistake, told as one; a well-formed id
	// of no agent or contact of the account filters to an empty list.
	for _, id := range []struct{ param, prefix, value string }{
		{"agent_id", projections.PrefixAgent, f.AgentID}, {"contact_id", projections.PrefixContact, f.ContactID}} {
		if _, given := q.Filters[id.param]; given {
			if _, ok := projections.ParseID(id.prefix, id.value); !ok {
				s.writeError(w, r, apiError(projections.EInvalid, id.param, "%s must be an id %s…, got %q", id.param, id.prefix, id.value))
				return
			}
		}
	}
	buf := pageBuffers.Get().(*[]byte)
	defer putPageBuffer(buf)
	body, lastID, more, err := s.deps.State.SessionsJSON((*buf)[:0], principal(w).Account.ID, f, q.ListQuery)
	*buf = body
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if more {
		setNextLink(w, r, q, lastID)
	}
	writeRawJSON(w, http.StatusOK, body)
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	buf := pageBuffers.Get().(*[]byte)
	defer putPageBuffer(buf)
	body, err := s.deps.State.SessionJSON((*buf)[:0], principal(w).Account.ID, param(w, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	*buf = body
	writeRawJSON(w, http.StatusOK, body)
}

func (s *Server) handleListContacts(w http.ResponseWriter, r *http.Request) {
	q, ok := s.listQuery(w, r, listSpec{projections.PrefixContact, []string{"email"}})
	if !ok {
		return
	}
	page, err := s.deps.State.Contacts(principal(w).Account.ID, q.ListQuery, q.Filters["email"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writePage(w, r, q, page, func(v projections.ContactView) string { return v.ID })
}

func (s *Server) handleGetContact(w http.ResponseWriter, r *http.Request) {
	v, err := s.deps.State.Contact(principal(w).Account.ID, param(w, "id"))
	s.respond(w, r, http.StatusOK, v, err)
}

// respond writes a command's or a read's outcome: a recorded (or first)
// idempotent answer as it was recorded, an error as the error object, a
// value as JSON with status.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch v := v.(type) {
	case projections.Replay:
		s.replay(w, r, v)
	case json.RawMessage:
		// Built by the projections' own encoders, which their tests hold
		// to encoding/json's output: written as is, not compacted again.
		w.Header()["Content-Type"] = jsonContentType
		w.WriteHeader(status)
		w.Write(v)
		w.Write(newline)
	default:
		writeJSON(w, status, v)
	}
}

var newline = []byte{'\n'}

// jsonContentType is the Content-Type of a JSON answer, set in the header
// map directly: Header.Set canonicalizes the name and allocates the value.
// net/http only reads it.
var jsonContentType = []string{"application/json"}

// decodeBody decodes the JSON body into v and returns its bytes; on failure
// it has answered.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	body, err := s.readJSON(w, r, v)
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	return body, true
}

// listQuery reads a list's query string (see parseListQuery); on failure
// it has answered.
func (s *Server) listQuery(w http.ResponseWriter, r *http.Request, spec listSpec) (listQuery, bool) {
	q, err := parseListQuery(r.URL.RawQuery, spec)
	if err != nil {
		s.writeError(w, r, err)
		return q, false
	}
	return q, true
}

// writePage writes {"data":[…]} and, when more items remain, a Link header
// to the next page (RFC 8288).
func writePage[T any](w http.ResponseWriter, r *http.Request, q listQuery, page projections.Page[T], idOf func(T) string) {
	if page.More && len(page.Data) > 0 {
		setNextLink(w, r, q, idOf(page.Data[len(page.Data)-1]))
	}
	writeJSON(w, http.StatusOK, page)
}

// setNextLink sets the Link header to the page after the item lastID: the
// list's query with starting_after set to lastID (q's params are the
// link's from then on).
func setNextLink(w http.ResponseWriter, r *http.Request, q listQuery, lastID string) {
	q.params["starting_after"] = []string{lastID}
	w.Header()["Link"] = []string{"<" + r.URL.Path + "?" + q.params.Encode() + `>; rel="next"`}
}

// writeRawJSON writes a body that is already JSON.
func writeRawJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

func (s *Server) handleRegisterWebhook(w http.ResponseWriter, r *http.Request) {
	var in projections.WebhookInput
	body, ok := s.decodeBody(w, r, &in)
	if !ok {
		return
	}
	idem, ok := s.idempotency(w, r, body, http.StatusCreated)
	if !ok {
		return
	}
	s.sealAnswers(idem) // the answer holds the secret
	v, err := s.deps.State.RegisterWebhook(r.Context(), principal(w), in, idem)
	s.respondSealed(w, r, http.StatusCreated, v, err)
}

func (s *Server) handleListWebhooks(w http.ResponseWriter, r *http.Request) {
	q, ok := s.listQuery(w, r, listSpec{idPrefix: projections.PrefixWebhook})
	if !ok {
		return
	}
	page, err := s.deps.State.Webhooks(principal(w).Account.ID, q.ListQuery)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writePage(w, r, q, page, func(v projections.WebhookView) string { return v.ID })
}

func (s *Server) handleGetWebhook(w http.ResponseWriter, r *http.Request) {
	v, err := s.deps.State.Webhook(principal(w).Account.ID, param(w, "id"))
	s.respond(w, r, http.StatusOK, v, err)
}

func (s *Server) handleDeleteWebhook(w http.ResponseWriter, r *http.Request) {
	if err := s.deps.State.DeleteWebhook(r.Context(), principal(w), param(w, "id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deliveriesOf answers the request with an error and returns false unless
// wh is a webhook of the caller's account and deliveries run here.
func (s *Server) deliveriesOf(w http.ResponseWriter, r *http.Request, wh string) bool {
	if _, err := s.deps.State.Webhook(principal(w).Account.ID, wh); err != nil {
		s.writeError(w, r, err)
		return false
	}
	if s.deps.Deliveries == nil {
		s.writeError(w, r, apiError(EUnavailable, "", "deliveries are not running"))
		return false
	}
	return true
}

func (s *Server) handleListDeliveries(w http.ResponseWriter, r *http.Request) {
	q, ok := s.listQuery(w, r, listSpec{delivery.PrefixDelivery, []string{"status", "event", "since", "until"}})
	if !ok {
		return
	}
	f, err := deliveryFilter(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wh := param(w, "id")
	if !s.deliveriesOf(w, r, wh) {
		return
	}
	ds, more, err := s.deps.Deliveries.DeliveriesWhere(wh, q.Limit, q.StartingAfter, f)
	if errors.Is(err, delivery.ErrNoDelivery) {
		s.writeError(w, r, apiError(projections.EInvalid, "starting_after", "no delivery %q of webhook %s", q.StartingAfter, wh))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page := projections.Page[delivery.Delivery]{Data: ds, More: more}
	if page.Data == nil {
		page.Data = []delivery.Delivery{}
	}
	writePage(w, r, q, page, func(d delivery.Delivery) string { return d.ID })
}

func (s *Server) handleRetryDelivery(w http.ResponseWriter, r *http.Request) {
	// It takes no fields: a body, if any, must be {} as application/json,
	// as for every other POST (a wrong one is refused before anything runs).
	var none struct{}
	if _, ok := s.decodeOptional(w, r, &none); !ok {
		return
	}
	wh, id := param(w, "id"), param(w, "delivery_id")
	if !s.deliveriesOf(w, r, wh) {
		return
	}
	if err := s.deps.State.WebhookSendable(principal(w).Account.ID, wh); err != nil {
		s.writeError(w, r, err) // disabled: enable it first, as for a test, recover or replay
		return
	}
	d, err := s.deps.Deliveries.Retry(r.Context(), wh, id)
	switch {
	case errors.Is(err, delivery.ErrNotRunning):
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, apiError(EUnavailable, "", "the deliveries of webhook %s are not running at the moment (starting or stopping); retry shortly", wh))
	case errors.Is(err, delivery.ErrNoDelivery):
		s.writeError(w, r, apiError(projections.ENotFound, "", "no delivery %q of webhook %s", id, wh))
	case errors.Is(err, delivery.ErrNotFailed):
		s.writeError(w, r, apiError(projections.EInvalidState, "", "delivery %s is %s; only a failed delivery can be retried", id, d.Status))
	case err != nil:
		s.writeError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, d)
	}
}
