package http

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"demosvc/projections"
)

// UserInput is the body of POST /admin/users.
type UserInput struct {
	AccountID string `json:"account_id"`
	Email     string `json:"email"`
	Role      string `json:"role"`
}

// SetupLinkView is a one-time setup link as `users create` and `users
// reset-password` print it: the only time the link exists outside its
// holder.
type SetupLinkView struct {
	User      projections.User `json:"user"`
	SetupURL  string           `json:"setup_url"`
	ExpiresAt string           `json:"expires_at"`
}

func (a *Admin) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock()
}

func (a *Admin) linkView(u projections.User, l projections.SetupLink) SetupLinkView {
	return SetupLinkView{User: u, SetupURL: a.DashboardURL + l.Path(), ExpiresAt: l.ExpiresAt.String()}
}

func (a *Admin) handleCreateUser(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var in UserInput
	if !a.decode(w, r, &in) {
		return
	}
	if in.Role == "" {
		in.Role = projections.RoleViewer // least privilege unless asked
	}
	u, link, err := a.State.CreateUser(r.Context(), "cli", in.AccountID, in.Email, in.Role, a.now())
	if err != nil {
		a.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, a.linkView(u, link))
}

func (a *Admin) handleListUsers(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	account := r.URL.Query().Get("account")
	if !a.accountGiven(w, account) {
		return
	}
	writeJSON(w, http.StatusOK, List[projections.User]{Data: a.State.Users(account)})
}

// handleResetPassword issues a new setup link; the password stays until
// the link is used, which ends every session of the user.
func (a *Admin) handleResetPassword(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	link, err := a.State.IssueSetupLink(r.Context(), "cli", "", ps.ByName("id"), a.now())
	if err != nil {
		a.writeDomainError(w, err)
		return
	}
	u, _ := a.State.UserByID(link.UserID)
	writeJSON(w, http.StatusOK, a.linkView(u, link))
}

func (a *Admin) handleDisableUser(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	u, err := a.State.DisableUser(r.Context(), "cli", "", ps.ByName("id"))
	if err != nil {
		a.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}
