package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	demohttp "demosvc/http"
	"demosvc/projections"
)

// secureCookies says whether cookies are marked Secure and take the
// __Host- prefix: when served over TLS, or when configured (behind a TLS
// proxy, where the request itself is plain HTTP), or when the dashboard's
// public URL is https (a TLS proxy in front, whatever secure_cookies says).
func (db *Dashboard) secureCookies(r *http.Request) bool {
	c := db.deps.Config.Dashboard
	return r.TLS != nil || c.SecureCookies || strings.HasPrefix(strings.ToLower(c.PublicURL), "https://")
}

func (db *Dashboard) cookieName(r *http.Request) string {
	if db.secureCookies(r) {
		return "__Host-demosvc_session"
	}
	return "demosvc_session"
}

func (db *Dashboard) setSessionCookie(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{
		Name: db.cookieName(r), Value: token, Path: "/",
		MaxAge:   int(db.sessions.MaxAge().Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: db.secureCookies(r),
	})
}

func (db *Dashboard) clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: db.cookieName(r), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: db.secureCookies(r)})
	if db.deps.UseKey != nil {
		http.SetCookie(w, &http.Cookie{Name: db.useCookieName(r), Value: "", Path: "/", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: db.secureCookies(r)})
	}
}

// The use cookie says when a session was last used: "UNIX.MAC", the MAC
// (HMAC-SHA256 under Deps.UseKey, base64url) over the session token's
// hash and the time. It can only tell a use that a node of this service
// saw: a client can send an older one, never a later one, and it counts
// only beside its own session cookie.

func (db *Dashboard) useCookieName(r *http.Request) string { return db.cookieName(r) + "_used" }

func (db *Dashboard) useMAC(token string, unix int64) string {
	mac := hmac.New(sha256.New, db.deps.UseKey)
	h := projections.TokenHash(token)
	mac.Write(h[:])
	mac.Write([]byte(strconv.FormatInt(unix, 10)))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// setUseCookie records now as the last use of token's session.
func (db *Dashboard) setUseCookie(w http.ResponseWriter, r *http.Request, token string) {
	if db.deps.UseKey == nil {
		return
	}
	now := db.deps.Clock().Unix()
	http.SetCookie(w, &http.Cookie{
		Name: db.useCookieName(r), Value: strconv.FormatInt(now, 10) + "." + db.useMAC(token, now), Path: "/",
		MaxAge:   int(db.sessions.MaxAge().Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: db.secureCookies(r),
	})
}

// lastUse returns the last use of token's session that r's use cookie
// proves; zero without one that holds.
func (db *Dashboard) lastUse(r *http.Request, token string) time.Time {
	if db.deps.UseKey == nil {
		return time.Time{}
	}
	ck, err := r.Cookie(db.useCookieName(r))
	if err != nil {
		return time.Time{}
	}
	at, mac, ok := strings.Cut(ck.Value, ".")
	unix, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || !hmac.Equal([]byte(mac), []byte(db.useMAC(token, unix))) {
		return time.Time{}
	}
	return time.Unix(unix, 0)
}

func clientOf(r *http.Request) projections.ClientInfo {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return projections.ClientInfo{Addr: host, UserAgent: r.UserAgent()}
}

type loginData struct {
	Email string
	Next  string
}

func (db *Dashboard) handleLoginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := db.caller(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	db.render(w, r, http.StatusOK, "login", view{Title: "Sign in", Data: loginData{Next: r.URL.Query().Get("next")}})
}

// busy reports a request refused for want of a password check's turn
// (projections.ErrPasswordBusy), or whose client left while it waited:
// neither is the service failing, so neither is logged as an error (a
// flood of sign-ins would flood the log).
func busy(r *http.Request, err error) bool {
	return errors.Is(err, projections.ErrPasswordBusy) || r.Context().Err() != nil
}

// emailLimitFactor is how many times an address's limit of sign-in
// attempts an e-mail has, from all addresses together. More than one: an
// e-mail's limit counts every attempt, a stranger's too, and were it the
// same as an address's, one address trying a wrong password for it now and
// then (within its own limit) would keep its owner from ever signing in.
// One address now never can; ten at their limit can, which an address's
// limit alone would let through.
const emailLimitFactor = 10

// handleLogin signs in. Attempts are limited per client address and per
// e-mail before any password is checked, so the limit also bounds the
// argon2 work one client can cause. Every failure says the same thing.
func (db *Dashboard) handleLogin(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	password := r.PostFormValue("password")
	next := r.PostFormValue("next")
	data := loginData{Email: email, Next: next}
	limit := db.deps.Config.Dashboard.SignInPerMinute
	client := clientOf(r)
	// An IPv6 client counts by its /64, as for the API's bad keys. An
	// e-mail longer than any user's counts by address only, without a
	// key of its own, and is refused without a hash.
	tooLong := len(email) > projections.MaxEmailBytes
	if !db.byAddr.Take(demohttp.LimiterKey(client.Addr), limit).Allowed ||
		!tooLong && !db.byEmail.Take(strings.ToLower(email), limit*emailLimitFactor).Allowed {
		w.Header().Set("Retry-After", "60")
		db.render(w, r, http.StatusTooManyRequests, "login", view{Title: "Sign in", Data: data,
			Error: "Too many sign-in attempts. Wait a minute, then try again."})
		return
	}
	token, err := "", projections.ErrBadCredentials
	if !tooLong {
		_, token, err = db.deps.State.SignIn(r.Context(), email, password, client, db.sessions.Now(), db.sessions.MaxAge())
	}
	if err != nil {
		status, msg := http.StatusUnauthorized, "Wrong e-mail or password."
		switch {
		case errors.Is(err, projections.ErrBadCredentials):
		case busy(r, err):
			w.Header().Set("Retry-After", "1")
			status, msg = http.StatusServiceUnavailable, "The service is busy signing others in. Try again in a moment."
		default:
			db.deps.Logger.Error("dashboard: sign in", "err", err)
			status, msg = http.StatusServiceUnavailable, "The service could not sign you in just now. Try again."
		}
		db.render(w, r, status, "login", view{Title: "Sign in", Data: data, Error: msg})
		return
	}
	db.setSessionCookie(w, r, token)
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

func (db *Dashboard) handleLogout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(db.cookieName(r)); err == nil {
		if err := db.deps.State.SignOut(r.Context(), ck.Value); err != nil {
			db.deps.Logger.Error("dashboard: sign out", "err", err)
			db.errorPage(w, r, http.StatusServiceUnavailable, "The service could not sign you out just now. Try again.")
			return
		}
		db.sessions.Forget(ck.Value)
	}
	db.clearSessionCookie(w, r)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

type setupData struct {
	Email     string // typed, for a first admin
	User      *projections.User
	ExpiresIn string
}

func (db *Dashboard) handleSetupForm(w http.ResponseWriter, r *http.Request) {
	target, ok := db.deps.State.Setup(r.PathValue("token"), db.sessions.Now())
	if !ok {
		db.errorPage(w, r, http.StatusNotFound, "This setup link is unknown, used or expired. Ask an admin for a new one (demosvc users reset-password).")
		return
	}
	db.render(w, r, http.StatusOK, "setup", view{Title: "Set your password", Data: setupData{User: target.User}})
}

func (db *Dashboard) handleSetup(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	now := db.sessions.Now()
	target, ok := db.deps.State.Setup(token, now)
	if !ok {
		db.errorPage(w, r, http.StatusNotFound, "This setup link is unknown, used or expired. Ask an admin for a new one (demosvc users reset-password).")
		return
	}
	email := strings.TrimSpace(r.PostFormValue("email"))
	password, confirm := r.PostFormValue("password"), r.PostFormValue("confirm")
	data := setupData{Email: email, User: target.User}
	fields := map[string]string{}
	if password != confirm {
		fields["confirm"] = "The two passwords differ."
	}
	if len(fields) == 0 {
		_, sess, err := db.deps.State.CompleteSetup(r.Context(), token, email, password, clientOf(r), now, db.sessions.MaxAge())
		if err == nil {
			db.setSessionCookie(w, r, sess)
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		if !fieldError(err, fields) {
			db.failed(w, r, err)
			return
		}
	}
	db.render(w, r, http.StatusUnprocessableEntity, "setup", view{Title: "Set your password", Data: data, Fields: fields})
}

// fieldError puts a domain validation error under its field; false for
// any other error.
func fieldError(err error, fields map[string]string) bool {
	var e *projections.Error
	if errors.As(err, &e) && e.Code == projections.EInvalid && e.Param != "" {
		fields[e.Param] = e.Message
		return true
	}
	return false
}

// failed answers an error from a command: not found is a 404 page, a
// refused command says why, anything else is the service's fault.
func (db *Dashboard) failed(w http.ResponseWriter, r *http.Request, err error) {
	if busy(r, err) {
		w.Header().Set("Retry-After", "1")
		db.errorPage(w, r, http.StatusServiceUnavailable, "The service is busy. Try again in a moment.")
		return
	}
	var e *projections.Error
	if errors.As(err, &e) {
		switch e.Code {
		case projections.ENotFound:
			db.errorPage(w, r, http.StatusNotFound, "Not found: "+e.Message+".")
		case projections.EInvalid, projections.EInvalidState, projections.ELimitExceeded:
			db.errorPage(w, r, http.StatusConflict, "Refused: "+e.Message+".")
		default:
			db.errorPage(w, r, http.StatusInternalServerError, "Something went wrong.")
		}
		return
	}
	// The route's pattern, not the path: a setup link's path is its token.
	db.deps.Logger.Error("dashboard: command failed", "route", r.Pattern, "err", err)
	db.errorPage(w, r, http.StatusServiceUnavailable, "The service could not do this just now. Try again.")
}
