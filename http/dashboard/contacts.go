package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"demosvc/projections"
)

// contactsPerPage is the length of one page of /contacts.
const contactsPerPage = 25

type contactsData struct {
	Page    projections.RowPage[projections.ContactRow]
	Search  string
	NextURL string
}

// handleContacts lists the account's contacts, newest first; a search by
// an exact e-mail is one lookup, by a part of a name or e-mail a bounded
// search.
func (db *Dashboard) handleContacts(w http.ResponseWriter, r *http.Request, c *caller) {
	qs := r.URL.Query()
	d := contactsData{Search: strings.TrimSpace(qs.Get("q"))}
	pg, err := db.deps.State.ContactRows(c.Account.ID, projections.ContactQuery{Search: d.Search, After: qs.Get("after"),
		Limit: contactsPerPage, Budget: searchBudget})
	if err != nil {
		db.render(w, r, http.StatusBadRequest, "contacts", view{Title: "Contacts", Section: "contacts", Data: d,
			Error: "This list cannot be shown: " + errorMessage(err) + "."})
		return
	}
	d.Page = pg
	if pg.Next != "" {
		v := url.Values{"after": {pg.Next}}
		if d.Search != "" {
			v.Set("q", d.Search)
		}
		d.NextURL = "/contacts?" + v.Encode()
	}
	db.render(w, r, http.StatusOK, "contacts", view{Title: "Contacts", Section: "contacts", Data: d})
}

type contactData struct {
	C       projections.ContactView
	Page    projections.RowPage[projections.SessionRow]
	NextURL string
}

// handleContact shows a contact and their sessions, newest first.
func (db *Dashboard) handleContact(w http.ResponseWriter, r *http.Request, c *caller) {
	ct, err := db.deps.State.Contact(c.Account.ID, r.PathValue("id"))
	if err != nil {
		db.failed(w, r, err)
		return
	}
	pg, err := db.deps.State.SessionRows(c.Account.ID, projections.SessionQuery{SessionFilter: projections.SessionFilter{ContactID: ct.ID},
		After: r.URL.Query().Get("after"), Limit: sessionsPerPage})
	if err != nil {
		db.failed(w, r, err)
		return
	}
	d := contactData{C: ct, Page: pg}
	if pg.Next != "" {
		d.NextURL = "/contacts/" + url.PathEscape(ct.ID) + "?" + url.Values{"after": {pg.Next}}.Encode()
	}
	db.render(w, r, http.StatusOK, "contact", view{Title: ct.Name, Section: "contacts", Data: d})
}
