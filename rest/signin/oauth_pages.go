package signin

import (
	"bytes"
	"encoding/json"
	"errors"
	"gatehouse/ent"
	"gatehouse/internal/httpx"
	"gatehouse/internal/identity"
	"gatehouse/internal/oauth"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// safeNext returns next when it is a local path ("/…", not "//…" nor
// holding a backslash or a control character, which browsers may turn
// into another host), else "": no open redirect.
func safeNext(next string) string {
	if next == "" || len(next) > 2048 || next[0] != '/' || strings.HasPrefix(next, "//") ||
		strings.ContainsRune(next, '\\') || strings.ContainsFunc(next, unicode.IsControl) {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return ""
	}
	return next
}

// renderPage writes an HTML page with headers that keep it out of caches
// and frames (clickjacking of the Approve button).
func renderPage(w http.ResponseWriter, r *http.Request, log *slog.Logger, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		internalAuthError(w, r, log, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// No form-action: browsers apply it to the redirect that follows the
	// form post, i.e. to the client's redirect URI.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

var authorizeParams = []string{"client_id", "redirect_uri", "response_type", "scope", "state", "code_challenge", "code_challenge_method"}

// paramRequestID names the pending request in the approval page's URL and
// in its form.
const paramRequestID = "request_id"

// approveURL is the approval page of one pending request.
func approveURL(id string) string {
	return approvePath + "?" + paramRequestID + "=" + url.QueryEscape(id)
}

// loginURL is the login page that continues to next.
func loginURL(next string) string { return loginPath + "?next=" + url.QueryEscape(next) }

func (h OAuth) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, k := range authorizeParams {
		if len(q[k]) > 1 {
			writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, k+" is given more than once")
			return
		}
	}
	p, err := h.Svc.Authorize(r.Context(), oauth.AuthorizeRequest{
		ClientID:            q.Get("client_id"),
		RedirectURI:         q.Get("redirect_uri"),
		ResponseType:        q.Get("response_type"),
		Scope:               q.Get("scope"),
		State:               q.Get("state"),
		CodeChallenge:       q.Get("code_challenge"),
		CodeChallengeMethod: q.Get("code_challenge_method"),
	})
	if err == nil {
		var u *ent.User
		if u, err = h.sessionUser(r); err == nil {
			err = h.keepPending(w, r, p, u)
			if err == nil && u == nil {
				found(w, loginURL(approveURL(p.ID)))
				return
			}
			if err == nil {
				found(w, approveURL(p.ID))
				return
			}
		}
	}
	var oe *oauth.Error
	switch {
	case errors.As(err, &oe) && oe.Redirectable:
		params := url.Values{"error": {oe.Code}, "error_description": {oe.Description}}
		if p.State != "" {
			params.Set("state", p.State)
		}
		redirectWith(w, p.RedirectURI, params)
	case errors.As(err, &oe):
		writeAuthError(w, http.StatusBadRequest, oe.Code, oe.Description)
	default:
		h.internal(w, r, err)
	}
}

type loginData struct {
	AppName    string
	SignedInAs string
	Error      string
	Username   string
	Next       string
}

func (h OAuth) loginPage(w http.ResponseWriter, r *http.Request) {
	u, err := h.sessionUser(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	d := loginData{Next: safeNext(r.URL.Query().Get("next"))}
	if u != nil {
		d.SignedInAs = u.Username
	}
	if p, ok := h.pendingOf(r, d.Next, u); ok {
		d.AppName = p.AppName
	}
	renderPage(w, r, h.Log, http.StatusOK, "login.html", d)
}

func (h OAuth) loginSubmit(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	ctx := r.Context()
	username, password := r.PostForm.Get("username"), r.PostForm.Get("password")
	next := safeNext(r.PostForm.Get("next"))
	d := loginData{Username: username, Next: next}
	if p, ok := h.pendingOf(r, next, nil); ok {
		d.AppName = p.AppName
	}
	addr := httpx.ClientAddr(r)
	allowed, err := h.Throttle.Attempt(ctx, username, addr)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if !allowed {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(h.Throttle.Window()/time.Second), 10))
		d.Error = "Too many failed sign-in attempts for this user. Try again later."
		renderPage(w, r, h.Log, http.StatusTooManyRequests, "login.html", d)
		return
	}
	si, err := h.Users.Authenticate(ctx, username, password)
	if errors.Is(err, identity.ErrInvalidCredentials) {
		d.Error = "Wrong username or password."
		renderPage(w, r, h.Log, http.StatusUnauthorized, "login.html", d)
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	u := si.User
	if err := h.Throttle.Succeeded(ctx, username, addr); err != nil {
		h.Log.WarnContext(ctx, "clear login attempts", "err", err, "request_id", httpx.GetRequestID(ctx))
	}
	// A new session token on every sign-in: a token planted before the
	// login (session fixation) is worth nothing after it.
	if err := h.Sessions.RenewToken(ctx); err != nil {
		h.internal(w, r, err)
		return
	}
	if prev := h.Sessions.GetInt(ctx, sessionUserID); prev != 0 && prev != u.ID {
		// Another user signs in on this browser: what the previous one
		// left pending is not theirs to approve.
		h.Sessions.Remove(ctx, sessionPending)
	}
	h.Sessions.Put(ctx, sessionUserID, u.ID)
	h.Sessions.Put(ctx, sessionSignedInAt, time.Now().UnixMilli())
	// The version the login read before the password check: a disable
	// or a new password committed while it was checked signs this
	// session out at once (sessionUser).
	h.Sessions.Put(ctx, sessionSecurityVersion, u.SecurityVersion)
	newest, err := h.adoptPending(w, r, u)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if next == "" {
		next = loginPath
		if newest != "" {
			next = approveURL(newest)
		}
	}
	found(w, next)
}

type approveData struct {
	AppName      string
	ClientID     string
	Username     string
	Scopes       []string
	RedirectHost string
	RequestID    string
	NotYou       string
}

const noPending = "no such pending authorization request (it may have expired or been decided); start again at the application"

func (h OAuth) approvePage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get(paramRequestID)
	u, err := h.sessionUser(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if u == nil {
		if _, ok := h.pendingCookie(r, id); ok {
			found(w, loginURL(approveURL(id)))
			return
		}
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, noPending)
		return
	}
	if _, err := h.adoptPending(w, r, u); err != nil { // signed in since the request was made
		h.internal(w, r, err)
		return
	}
	p, ok := h.sessionPending(r, id, u)
	if !ok {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, noPending)
		return
	}
	host := p.RedirectURI
	if ru, err := url.Parse(p.RedirectURI); err == nil && ru.Host != "" {
		host = ru.Host
	}
	renderPage(w, r, h.Log, http.StatusOK, "approve.html", approveData{
		AppName: p.AppName, ClientID: p.ClientID, Username: u.Username, Scopes: p.Scopes(), RedirectHost: host,
		RequestID: p.ID, NotYou: loginURL(approveURL(p.ID)),
	})
}

func (h OAuth) confirm(w http.ResponseWriter, r *http.Request) {
	approved, id, ok := readDecision(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	u, err := h.sessionUser(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if u == nil {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, "not signed in")
		return
	}
	// Exactly the request whose page was shown, and only if it is this
	// user's: a request made meanwhile (another tab, or another site
	// sending the browser to /oauth/authorize) has another id.
	p, ok := h.sessionPending(r, id, u)
	if !ok {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, noPending)
		return
	}
	// The decision is taken once.
	if err := h.dropPending(r, p.ID); err != nil {
		h.internal(w, r, err)
		return
	}
	params := url.Values{}
	if p.State != "" {
		params.Set("state", p.State)
	}
	if !approved {
		params.Set("error", oauth.CodeAccessDenied)
		redirectWith(w, p.RedirectURI, params)
		return
	}
	code, err := h.Svc.IssueCode(ctx, p, u.ID, h.signedInAt(r), h.securityVersion(r))
	var oe *oauth.Error
	if errors.As(err, &oe) {
		writeAuthError(w, http.StatusBadRequest, oe.Code, oe.Description)
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	params.Set("code", code)
	redirectWith(w, p.RedirectURI, params)
}

// readDecision reads "approved" (true/false) and "request_id" from a form
// or a JSON body. A missing request_id reads as "" (unknown: 400 later).
func readDecision(w http.ResponseWriter, r *http.Request) (approved bool, id string, ok bool) {
	bad := func(msg string) (bool, string, bool) {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, msg)
		return false, "", false
	}
	if isJSON(r) {
		obj, derr := httpx.DecodeObject(r)
		if derr != nil {
			if derr.Status == http.StatusRequestEntityTooLarge {
				writeAuthError(w, derr.Status, derr.Code, derr.Msg)
				return false, "", false
			}
			return bad(derr.Msg)
		}
		id, _, idOK := httpx.StringField(obj, paramRequestID)
		if !idOK {
			return bad(`"request_id" must be a string`)
		}
		raw, present := obj["approved"]
		if !present {
			return bad(`"approved" is required`)
		}
		var b bool
		if err := json.Unmarshal(raw, &b); err == nil {
			return b, id, true
		}
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			if v, err := strconv.ParseBool(s); err == nil {
				return v, id, true
			}
		}
		return bad(`"approved" must be true or false`)
	}
	if !parseForm(w, r) {
		return false, "", false
	}
	if len(r.PostForm[paramRequestID]) > 1 {
		return bad(`"request_id" must be given once`)
	}
	vals := r.PostForm["approved"]
	if len(vals) != 1 {
		return bad(`"approved" must be given once, true or false`)
	}
	v, err := strconv.ParseBool(vals[0])
	if err != nil {
		return bad(`"approved" must be true or false`)
	}
	return v, r.PostForm.Get(paramRequestID), true
}

// sessionUser returns the signed-in user, or nil. A user disabled, or
// given a new password, since signing in is signed out. A browser without
// a session cookie reads nothing from the session store.
// signedInAt is when the session's user signed in.
func (h OAuth) signedInAt(r *http.Request) time.Time {
	return time.UnixMilli(h.Sessions.GetInt64(r.Context(), sessionSignedInAt))
}

// securityVersion is the session user's security version when they
// signed in (0 in sessions of earlier releases, as every user's was then).
func (h OAuth) securityVersion(r *http.Request) int {
	return h.Sessions.GetInt(r.Context(), sessionSecurityVersion)
}

func (h OAuth) sessionUser(r *http.Request) (*ent.User, error) {
	ctx := r.Context()
	id := h.Sessions.GetInt(ctx, sessionUserID)
	if id == 0 {
		return nil, nil
	}
	u, err := h.Users.ActiveSince(ctx, id, h.signedInAt(r), h.securityVersion(r))
	if errors.Is(err, identity.ErrInactive) {
		h.Sessions.Remove(ctx, sessionUserID)
		return nil, nil
	}
	return u, err
}
