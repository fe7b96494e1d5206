package http

import (
	"errors"
	"io"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"demosvc/eventlog"
	"demosvc/eventlog/strictjson"
	"demosvc/projections"
)

// AccountInput is the body of POST /admin/accounts.
type AccountInput struct {
	Name               string `json:"name"`
	Plan               string `json:"plan"`
	RateLimitPerMinute int    `json:"rate_limit_per_minute"`
}

// KeyInput is the body of POST /admin/keys.
type KeyInput struct {
	AccountID string `json:"account_id"`
}

// List is the envelope of every list: {"data":[…]}.
type List[T any] struct {
	Data []T `json:"data"`
}

func (a *Admin) handleCreateAccount(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var in AccountInput
	if !a.decode(w, r, &in) {
		return
	}
	acc, err := a.State.CreateAccount(r.Context(), "cli", in.Name, in.Plan, in.RateLimitPerMinute)
	if err != nil {
		a.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, a.account(acc))
}

// AdminAccount is an account as `accounts list` shows it: with the rate
// limit in force (a starter or pro account's comes from config).
type AdminAccount struct {
	ID                 string                `json:"id"`
	Name               string                `json:"name"`
	Plan               string                `json:"plan"`
	RateLimitPerMinute int                   `json:"rate_limit_per_minute"`
	CreatedAt          projections.Timestamp `json:"created_at"`
}

func (a *Admin) account(acc projections.Account) AdminAccount {
	return AdminAccount{ID: acc.ID, Name: acc.Name, Plan: acc.Plan, RateLimitPerMinute: PlanLimit(a.Config, acc), CreatedAt: acc.CreatedAt}
}

func (a *Admin) handleListAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	accs := a.State.Accounts()
	out := make([]AdminAccount, len(accs))
	for i, acc := range accs {
		out[i] = a.account(acc)
	}
	writeJSON(w, http.StatusOK, List[AdminAccount]{Data: out})
}

func (a *Admin) handleCreateKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var in KeyInput
	if !a.decode(w, r, &in) {
		return
	}
	key, err := a.State.CreateKey(r.Context(), "cli", in.AccountID)
	if err != nil {
		a.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, key)
}

func (a *Admin) handleListKeys(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	account := r.URL.Query().Get("account")
	if !a.accountGiven(w, account) {
		return
	}
	writeJSON(w, http.StatusOK, List[projections.APIKey]{Data: a.State.Keys(account)})
}

// accountGiven reports whether account, a list's --account, is "" (every
// account) or an account's id; else it has answered 404, so that a
// mistyped id is not taken for an account with nothing to list.
func (a *Admin) accountGiven(w http.ResponseWriter, account string) bool {
	if account == "" {
		return true
	}
	for _, acc := range a.State.Accounts() {
		if acc.ID == account {
			return true
		}
	}
	writeAdminError(w, http.StatusNotFound, "no account "+account)
	return false
}

func (a *Admin) handleRevokeKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	key, err := a.State.RevokeKey(r.Context(), "cli", ps.ByName("id"))
	if err != nil {
		a.writeDomainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, key)
}

// decode reads a JSON body of at most 1 MiB strictly: unknown fields and
// trailing data are refused.
func (a *Admin) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = strictjson.DecodeObject(body, v)
	}
	if err != nil {
		writeAdminError(w, http.StatusBadRequest, "malformed request body: "+err.Error())
		return false
	}
	return true
}

func (a *Admin) writeDomainError(w http.ResponseWriter, err error) {
	var e *projections.Error
	if errors.As(err, &e) {
		msg := e.Message
		if e.Param != "" && e.Code == projections.EInvalid {
			msg = e.Param + ": " + msg
		}
		writeAdminError(w, statusOf(e.Code), msg)
		return
	}
	if errors.Is(err, eventlog.ErrNotWriter) && a.WriterAddr != nil {
		// An admin command writes through this node's log, which only the
		// cluster's writer appends to.
		where := "no node is the writer at the moment (one is being elected): retry shortly"
		if addr := a.WriterAddr(); addr != "" {
			where = "run the command on the node whose API answers at " + addr + ", the writer now (`demosvc cluster status` names it)"
		}
		writeAdminError(w, http.StatusServiceUnavailable, "this node is not the cluster's writer: "+where)
		return
	}
	writeAdminError(w, http.StatusServiceUnavailable, err.Error())
}
