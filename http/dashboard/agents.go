package dashboard

import (
	"net/http"
	"net/url"

	"demosvc/projections"
)

// agentsPerPage is the length of one page of /agents.
const agentsPerPage = 20

type agentsData struct {
	Agents []projections.AgentView
	Status string // the filter: "", active or inactive
	Next   string // the URL of the next page; "" on the last
}

// handleAgents lists the account's agents, newest first, a page at a time
// (cursor: the last id shown), optionally only one status.
func (db *Dashboard) handleAgents(w http.ResponseWriter, r *http.Request, c *caller) {
	q := r.URL.Query()
	status := q.Get("status")
	pg, err := db.deps.State.Agents(c.Account.ID, projections.ListQuery{Limit: agentsPerPage, StartingAfter: q.Get("after")}, status)
	if err != nil {
		db.errorPage(w, r, http.StatusBadRequest, "This list cannot be shown: "+errorMessage(err)+".")
		return
	}
	d := agentsData{Agents: pg.Data, Status: status}
	if pg.More && len(pg.Data) > 0 {
		v := url.Values{"after": {pg.Data[len(pg.Data)-1].ID}}
		if status != "" {
			v.Set("status", status)
		}
		d.Next = "/agents?" + v.Encode()
	}
	db.render(w, r, http.StatusOK, "agents", view{Title: "Agents", Section: "agents", Data: d})
}

func errorMessage(err error) string {
	if e, ok := err.(*projections.Error); ok {
		return e.Message
	}
	return "internal error"
}

// agentForm is an agent's form as typed, so that a refused form comes back
// with what the user wrote.
type agentForm struct {
	ID         string
	Name       string
	SandboxURL string
	Persona    string
	Status     string
	CreatedAt  string
	UpdatedAt  string
}

func formOf(r *http.Request) agentForm {
	return agentForm{Name: r.PostFormValue("name"), SandboxURL: r.PostFormValue("sandbox_url"), Persona: r.PostFormValue("persona")}
}

func formFromView(a projections.AgentView) agentForm {
	f := agentForm{ID: a.ID, Name: a.Name, SandboxURL: a.SandboxURL, Status: a.Status, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
	if a.Persona != nil {
		f.Persona = *a.Persona
	}
	return f
}

func (db *Dashboard) handleNewAgentForm(w http.ResponseWriter, r *http.Request, c *caller) {
	db.render(w, r, http.StatusOK, "agent_new", view{Title: "New agent", Section: "agents", Data: agentForm{}})
}

func (db *Dashboard) handleCreateAgent(w http.ResponseWriter, r *http.Request, c *caller) {
	f := formOf(r)
	in := projections.AgentInput{Name: f.Name, SandboxURL: f.SandboxURL, Persona: &f.Persona}
	v, err := db.deps.State.CreateAgent(r.Context(), c.principal(), in, nil)
	if err != nil {
		fields := map[string]string{}
		if !fieldError(err, fields) {
			db.failed(w, r, err)
			return
		}
		db.render(w, r, http.StatusUnprocessableEntity, "agent_new", view{Title: "New agent", Section: "agents", Data: f, Fields: fields})
		return
	}
	http.Redirect(w, r, "/agents/"+url.PathEscape(v.(projections.AgentView).ID), http.StatusSeeOther)
}

func (db *Dashboard) handleAgent(w http.ResponseWriter, r *http.Request, c *caller) {
	a, err := db.deps.State.Agent(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return
	}
	db.render(w, r, http.StatusOK, "agent", view{Title: a.Name, Section: "agents", Data: formFromView(a)})
}

// handleUpdateAgent sends the fields that changed, so an unchanged form
// changes nothing (and leaves updated_at alone).
func (db *Dashboard) handleUpdateAgent(w http.ResponseWriter, r *http.Request, c *caller) {
	cur, err := db.deps.State.Agent(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return
	}
	f := formOf(r)
	var patch projections.AgentPatch
	if f.Name != cur.Name {
		patch.Name = &f.Name
	}
	if f.SandboxURL != cur.SandboxURL {
		patch.SandboxURL = &f.SandboxURL
	}
	if cur.Persona == nil || f.Persona != *cur.Persona {
		patch.Persona = &f.Persona
	}
	if _, err := db.deps.State.UpdateAgent(r.Context(), c.principal(), cur.ID, patch); err != nil {
		fields := map[string]string{}
		if !fieldError(err, fields) {
			db.failed(w, r, err)
			return
		}
		f.ID, f.Status, f.CreatedAt, f.UpdatedAt = cur.ID, cur.Status, cur.CreatedAt, cur.UpdatedAt
		db.render(w, r, http.StatusUnprocessableEntity, "agent", view{Title: cur.Name, Section: "agents", Data: f, Fields: fields})
		return
	}
	http.Redirect(w, r, "/agents/"+url.PathEscape(cur.ID), http.StatusSeeOther)
}

func (db *Dashboard) handleAgentStatus(w http.ResponseWriter, r *http.Request, c *caller) {
	status := r.PostFormValue("status")
	id := r.PathValue("id")
	if _, err := db.deps.State.UpdateAgent(r.Context(), c.principal(), id, projections.AgentPatch{Status: &status}); err != nil {
		db.failed(w, r, err)
		return
	}
	http.Redirect(w, r, "/agents/"+url.PathEscape(id), http.StatusSeeOther)
}
