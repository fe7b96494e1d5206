package dashboard

import (
	"net/http"
	"slices"
	"strings"

	demohttp "demosvc/http"
	"demosvc/projections"
)

func (db *Dashboard) handleSettings(w http.ResponseWriter, r *http.Request, c *caller) {
	db.render(w, r, http.StatusOK, "settings", view{Title: "Settings", Section: "settings"})
}

type accountData struct {
	Account   projections.Account
	RateLimit int // requests per minute in force; 0 = unlimited
}

func (db *Dashboard) handleAccount(w http.ResponseWriter, r *http.Request, c *caller) {
	db.render(w, r, http.StatusOK, "account", view{Title: "Account", Section: "settings",
		Data: accountData{Account: c.Account, RateLimit: demohttp.PlanLimit(db.deps.Config, c.Account)}})
}

type keyRow struct {
	projections.APIKey
	CreatedBy string // "cli", or the user's e-mail
}

type keysData struct {
	Keys   []keyRow
	NewKey *projections.NewKey
}

// keyRows lists the account's keys, newest first, naming their creators.
func (db *Dashboard) keyRows(account string) []keyRow {
	emails := map[string]string{}
	for _, u := range db.deps.State.Users(account) {
		emails[u.ID] = u.Email
	}
	keys := db.deps.State.Keys(account)
	rows := make([]keyRow, 0, len(keys))
	for _, k := range slices.Backward(keys) {
		by := k.CreatedBy
		if e, ok := emails[by]; ok {
			by = e
		}
		rows = append(rows, keyRow{APIKey: k, CreatedBy: by})
	}
	return rows
}

func (db *Dashboard) handleKeys(w http.ResponseWriter, r *http.Request, c *caller) {
	db.render(w, r, http.StatusOK, "keys", view{Title: "API Keys", Section: "settings", Data: keysData{Keys: db.keyRows(c.Account.ID)}})
}

// handleCreateKey creates a key with the same command as the API and the
// CLI, and shows it once, on this answer (never cached: no-store).
func (db *Dashboard) handleCreateKey(w http.ResponseWriter, r *http.Request, c *caller) {
	key, err := db.deps.State.CreateKey(r.Context(), c.User.ID, c.Account.ID)
	if err != nil {
		db.failed(w, r, err)
		return
	}
	db.render(w, r, http.StatusCreated, "keys", view{Title: "API Keys", Section: "settings",
		Data: keysData{Keys: db.keyRows(c.Account.ID), NewKey: &key}})
}

// accountKey returns the caller's account's key id, or false: another
// account's key is not found, exactly like an unknown one.
func (db *Dashboard) accountKey(c *caller, id string) (projections.APIKey, bool) {
	for _, k := range db.deps.State.Keys(c.Account.ID) {
		if k.ID == id {
			return k, true
		}
	}
	return projections.APIKey{}, false
}

func (db *Dashboard) handleRevokeKeyForm(w http.ResponseWriter, r *http.Request, c *caller) {
	k, ok := db.accountKey(c, r.PathValue("id"))
	if !ok {
		db.errorPage(w, r, http.StatusNotFound, "There is no such API key in your account.")
		return
	}
	db.render(w, r, http.StatusOK, "revoke", view{Title: "Revoke API key", Section: "settings", Data: k})
}

func (db *Dashboard) handleRevokeKey(w http.ResponseWriter, r *http.Request, c *caller) {
	k, ok := db.accountKey(c, r.PathValue("id"))
	if !ok {
		db.errorPage(w, r, http.StatusNotFound, "There is no such API key in your account.")
		return
	}
	if _, err := db.deps.State.RevokeKey(r.Context(), c.User.ID, k.ID); err != nil {
		db.failed(w, r, err)
		return
	}
	http.Redirect(w, r, "/settings/api-keys", http.StatusSeeOther)
}

type usersData struct {
	Users   []projections.User
	Invited *invited
	Email   string
	Role    string
}

type invited struct {
	Email string
	URL   string
}

func (db *Dashboard) handleUsers(w http.ResponseWriter, r *http.Request, c *caller) {
	db.render(w, r, http.StatusOK, "users", view{Title: "Users", Section: "settings",
		Data: usersData{Users: db.deps.State.Users(c.Account.ID), Role: projections.RoleViewer}})
}

// handleInviteUser creates a user and shows their one-time setup link.
func (db *Dashboard) handleInviteUser(w http.ResponseWriter, r *http.Request, c *caller) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	role := r.PostFormValue("role")
	data := usersData{Email: email, Role: role}
	u, link, err := db.deps.State.CreateUser(r.Context(), c.User.ID, c.Account.ID, email, role, db.sessions.Now())
	if err != nil {
		fields := map[string]string{}
		if !fieldError(err, fields) {
			db.failed(w, r, err)
			return
		}
		data.Users = db.deps.State.Users(c.Account.ID)
		db.render(w, r, http.StatusUnprocessableEntity, "users", view{Title: "Users", Section: "settings", Data: data, Fields: fields})
		return
	}
	data = usersData{Users: db.deps.State.Users(c.Account.ID), Role: projections.RoleViewer,
		Invited: &invited{Email: u.Email, URL: db.origin(r) + link.Path()}}
	db.render(w, r, http.StatusCreated, "users", view{Title: "Users", Section: "settings", Data: data})
}

// origin is the base of links the dashboard hands out: dashboard.public_url
// when set (behind a proxy), else the origin the browser reached it at.
func (db *Dashboard) origin(r *http.Request) string {
	if u := db.deps.Config.Dashboard.PublicURL; u != "" {
		return strings.TrimSuffix(u, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (db *Dashboard) accountUser(c *caller, id string) (projections.User, bool) {
	u, ok := db.deps.State.UserByID(id)
	if !ok || u.AccountID != c.Account.ID {
		return projections.User{}, false
	}
	return u, true
}

func (db *Dashboard) handleDisableUserForm(w http.ResponseWriter, r *http.Request, c *caller) {
	u, ok := db.accountUser(c, r.PathValue("id"))
	if !ok {
		db.errorPage(w, r, http.StatusNotFound, "There is no such user in your account.")
		return
	}
	db.render(w, r, http.StatusOK, "disable", view{Title: "Disable user", Section: "settings", Data: u})
}

func (db *Dashboard) handleDisableUser(w http.ResponseWriter, r *http.Request, c *caller) {
	u, ok := db.accountUser(c, r.PathValue("id"))
	if !ok {
		db.errorPage(w, r, http.StatusNotFound, "There is no such user in your account.")
		return
	}
	if u.ID == c.User.ID {
		db.errorPage(w, r, http.StatusConflict, "You cannot disable yourself: ask another admin.")
		return
	}
	if _, err := db.deps.State.DisableUser(r.Context(), c.User.ID, c.Account.ID, u.ID); err != nil {
		db.failed(w, r, err)
		return
	}
	http.Redirect(w, r, "/settings/users", http.StatusSeeOther)
}
