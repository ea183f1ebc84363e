package rest

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"gatehouse/ent"
	"gatehouse/internal/httpx"
	"gatehouse/internal/identity"
	"gatehouse/internal/oauth"
)

//go:embed templates/*.html
var templateFS embed.FS

// pages are the HTML pages of the authorization flow. html/template
// escapes every value for its context (text, attribute, URL).
var pages = template.Must(template.ParseFS(templateFS, "templates/*.html"))

// Session keys.
const (
	sessionUserID  = "uid"
	sessionPending = "oauth_pending"
)

// Paths of the browser part of the flow.
const (
	loginPath   = "/login"
	approvePath = "/oauth/approve"
)

// OAuth serves the authorization code scheme (scheme 2, CONTRACT §3): the
// browser pages (/oauth/authorize, /login, /oauth/approve, /oauth/confirm)
// on a server-side session, and the client endpoints (/oauth/token,
// /oauth/userinfo, /oauth/revoke, /oauth/introspect).
type OAuth struct {
	Svc      *oauth.Service
	Users    *identity.Users
	Throttle *identity.LoginThrottle
	Sessions *scs.SessionManager
	Log      *slog.Logger
}

// Mount adds the routes to r.
func (h OAuth) Mount(r chi.Router) {
	// Cross-site POSTs to the form endpoints are refused (403): they would
	// let another site sign a user in (login CSRF) or approve on their behalf.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeAuthError(w, http.StatusForbidden, "forbidden", "cross-origin request refused")
	}))
	r.Group(func(r chi.Router) {
		r.Use(h.Sessions.LoadAndSave)
		r.Get("/oauth/authorize", h.authorize)
		r.Get(loginPath, h.loginPage)
		r.Method(http.MethodPost, loginPath, cop.Handler(http.HandlerFunc(h.loginSubmit)))
		r.Get(approvePath, h.approvePage)
		r.Method(http.MethodPost, "/oauth/confirm", cop.Handler(http.HandlerFunc(h.confirm)))
	})
	r.Post("/oauth/token", h.token)
	r.Get("/oauth/userinfo", h.userinfo)
	r.Post("/oauth/userinfo", h.userinfo)
	r.Post("/oauth/revoke", h.revoke)
	r.Post("/oauth/introspect", h.introspect)
}

// ---- browser side ----

var authorizeParams = []string{"client_id", "redirect_uri", "response_type", "scope", "state", "code_challenge", "code_challenge_method"}

func (h OAuth) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, k := range authorizeParams {
		if len(q[k]) > 1 {
			writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, k+" is given more than once")
			return
		}
	}
	ctx := r.Context()
	p, err := h.Svc.Authorize(ctx, oauth.AuthorizeRequest{
		ClientID:            q.Get("client_id"),
		RedirectURI:         q.Get("redirect_uri"),
		ResponseType:        q.Get("response_type"),
		Scope:               q.Get("scope"),
		State:               q.Get("state"),
		CodeChallenge:       q.Get("code_challenge"),
		CodeChallengeMethod: q.Get("code_challenge_method"),
	})
	var oe *oauth.Error
	switch {
	case errors.As(err, &oe) && oe.Redirectable:
		params := url.Values{"error": {oe.Code}, "error_description": {oe.Description}}
		if p.State != "" {
			params.Set("state", p.State)
		}
		redirectWith(w, p.RedirectURI, params)
		return
	case errors.As(err, &oe):
		writeAuthError(w, http.StatusBadRequest, oe.Code, oe.Description)
		return
	case err != nil:
		h.internal(w, r, err)
		return
	}
	b, err := json.Marshal(p)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.Sessions.Put(ctx, sessionPending, b)
	u, err := h.sessionUser(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if u == nil {
		found(w, loginPath+"?next="+url.QueryEscape(approvePath))
		return
	}
	found(w, approvePath)
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
	if p, ok := h.pending(r); ok {
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
	if p, ok := h.pending(r); ok {
		d.AppName = p.AppName
	}
	allowed, err := h.Throttle.Attempt(ctx, username)
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
	u, err := h.Users.Authenticate(ctx, username, password)
	if errors.Is(err, identity.ErrInvalidCredentials) {
		d.Error = "Wrong username or password."
		renderPage(w, r, h.Log, http.StatusUnauthorized, "login.html", d)
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if err := h.Throttle.Succeeded(ctx, username); err != nil {
		h.Log.WarnContext(ctx, "clear login attempts", "err", err, "request_id", httpx.GetRequestID(ctx))
	}
	// A new session token on every sign-in: a token planted before the
	// login (session fixation) is worth nothing after it.
	if err := h.Sessions.RenewToken(ctx); err != nil {
		h.internal(w, r, err)
		return
	}
	h.Sessions.Put(ctx, sessionUserID, u.ID)
	if next == "" {
		next = loginPath
		if _, ok := h.pending(r); ok {
			next = approvePath
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
}

func (h OAuth) approvePage(w http.ResponseWriter, r *http.Request) {
	p, ok := h.pending(r)
	if !ok {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, "no pending authorization request (it may have expired); start again at the application")
		return
	}
	u, err := h.sessionUser(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if u == nil {
		found(w, loginPath+"?next="+url.QueryEscape(approvePath))
		return
	}
	host := p.RedirectURI
	if ru, err := url.Parse(p.RedirectURI); err == nil && ru.Host != "" {
		host = ru.Host
	}
	renderPage(w, r, h.Log, http.StatusOK, "approve.html", approveData{
		AppName: p.AppName, ClientID: p.ClientID, Username: u.Username, Scopes: p.Scopes(), RedirectHost: host,
	})
}

func (h OAuth) confirm(w http.ResponseWriter, r *http.Request) {
	approved, ok := readApproved(w, r)
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
	p, ok := h.pending(r)
	if !ok {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, "no pending authorization request (it may have expired); start again at the application")
		return
	}
	// The decision is taken once.
	h.Sessions.Remove(ctx, sessionPending)
	params := url.Values{}
	if p.State != "" {
		params.Set("state", p.State)
	}
	if !approved {
		params.Set("error", oauth.CodeAccessDenied)
		redirectWith(w, p.RedirectURI, params)
		return
	}
	code, err := h.Svc.IssueCode(ctx, p, u.ID)
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

// readApproved reads "approved" (true/false) from a form or a JSON body.
func readApproved(w http.ResponseWriter, r *http.Request) (approved, ok bool) {
	bad := func(msg string) (bool, bool) {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, msg)
		return false, false
	}
	if isJSON(r) {
		obj, derr := httpx.DecodeObject(r)
		if derr != nil {
			if derr.Status == http.StatusRequestEntityTooLarge {
				writeAuthError(w, derr.Status, derr.Code, derr.Msg)
				return false, false
			}
			return bad(derr.Msg)
		}
		raw, present := obj["approved"]
		if !present {
			return bad(`"approved" is required`)
		}
		var b bool
		if err := json.Unmarshal(raw, &b); err == nil {
			return b, true
		}
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			if v, err := strconv.ParseBool(s); err == nil {
				return v, true
			}
		}
		return bad(`"approved" must be true or false`)
	}
	if !parseForm(w, r) {
		return false, false
	}
	vals := r.PostForm["approved"]
	if len(vals) != 1 {
		return bad(`"approved" must be given once, true or false`)
	}
	v, err := strconv.ParseBool(vals[0])
	if err != nil {
		return bad(`"approved" must be true or false`)
	}
	return v, true
}

// sessionUser returns the signed-in user, or nil. A user disabled since
// signing in is signed out.
func (h OAuth) sessionUser(r *http.Request) (*ent.User, error) {
	ctx := r.Context()
	id := h.Sessions.GetInt(ctx, sessionUserID)
	if id == 0 {
		return nil, nil
	}
	u, err := h.Users.Active(ctx, id)
	if errors.Is(err, identity.ErrInactive) {
		h.Sessions.Remove(ctx, sessionUserID)
		return nil, nil
	}
	return u, err
}

// pending returns the session's unexpired pending authorization request.
func (h OAuth) pending(r *http.Request) (oauth.Pending, bool) {
	b := h.Sessions.GetBytes(r.Context(), sessionPending)
	if b == nil {
		return oauth.Pending{}, false
	}
	var p oauth.Pending
	if err := json.Unmarshal(b, &p); err != nil || p.ExpiredAt(h.Svc.Now()) {
		return oauth.Pending{}, false
	}
	return p, true
}

func (h OAuth) internal(w http.ResponseWriter, r *http.Request, err error) {
	internalAuthError(w, r, h.Log, err)
}

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

// found answers 302 to a local path.
func found(w http.ResponseWriter, location string) {
	w.Header().Set("Location", location)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusFound)
}

// redirectWith answers 302 to a registered redirect URI with params
// added to its query (which it may already have).
func redirectWith(w http.ResponseWriter, redirectURI string, params url.Values) {
	sep := "?"
	switch {
	case strings.HasSuffix(redirectURI, "?"):
		sep = ""
	case strings.Contains(redirectURI, "?"):
		sep = "&"
	}
	found(w, redirectURI+sep+params.Encode())
}

// parseForm parses a urlencoded body; a body over the limit is 413,
// anything else unreadable 400 invalid_request.
func parseForm(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeAuthError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "request body must be at most 64 KiB")
			return false
		}
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, "the form body cannot be parsed")
		return false
	}
	return true
}

func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
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

// ---- client side ----

// tokenParams reads the parameters of a client request from a
// urlencoded form or a JSON object of strings; a parameter given twice is
// invalid_request (RFC 6749 §3.2). Query parameters are ignored: client
// credentials must not travel in URLs.
func tokenParams(w http.ResponseWriter, r *http.Request) (map[string]string, bool) {
	out := map[string]string{}
	if isJSON(r) {
		obj, derr := httpx.DecodeObject(r)
		if derr != nil {
			if derr.Status == http.StatusRequestEntityTooLarge {
				writeAuthError(w, derr.Status, derr.Code, derr.Msg)
				return nil, false
			}
			writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, derr.Msg)
			return nil, false
		}
		for k := range obj {
			v, present, ok := httpx.StringField(obj, k)
			if !ok {
				writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, strconv.Quote(k)+" must be a string")
				return nil, false
			}
			if present {
				out[k] = v
			}
		}
		return out, true
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-www-form-urlencoded" {
			writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, "Content-Type must be application/x-www-form-urlencoded or application/json")
			return nil, false
		}
	}
	if !parseForm(w, r) {
		return nil, false
	}
	for k, vs := range r.PostForm {
		if len(vs) > 1 {
			writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, k+" is given more than once")
			return nil, false
		}
		out[k] = vs[0]
	}
	return out, true
}

// authClient authenticates the calling client with HTTP Basic (RFC 6749
// §2.3.1: id and secret form-encoded) or client_id and client_secret in
// the body; using both is invalid_request.
func (h OAuth) authClient(w http.ResponseWriter, r *http.Request, params map[string]string) (oauth.Client, bool) {
	ctx := r.Context()
	fail := func() (oauth.Client, bool) {
		w.Header().Set("WWW-Authenticate", `Basic realm="gatehouse"`)
		writeAuthError(w, http.StatusUnauthorized, oauth.CodeInvalidClient, "client authentication failed")
		return oauth.Client{}, false
	}
	auth := r.Header.Get("Authorization")
	if scheme, _, _ := strings.Cut(auth, " "); strings.EqualFold(scheme, "Basic") {
		rawID, rawSecret, ok := r.BasicAuth()
		if !ok {
			return fail()
		}
		if params["client_secret"] != "" {
			writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, "use one client authentication method, not both")
			return oauth.Client{}, false
		}
		id, err1 := url.QueryUnescape(rawID)
		sec, err2 := url.QueryUnescape(rawSecret)
		if err1 != nil || err2 != nil {
			id, sec = rawID, rawSecret
		}
		if bodyID := params["client_id"]; bodyID != "" && bodyID != id {
			return fail()
		}
		c, err := h.Svc.AuthenticateClient(ctx, id, sec)
		if oauth.IsCode(err, oauth.CodeInvalidClient) && (id != rawID || sec != rawSecret) {
			// A client that did not form-encode a secret holding '+' or '%'.
			c, err = h.Svc.AuthenticateClient(ctx, rawID, rawSecret)
		}
		return h.clientResult(w, r, c, err, fail)
	}
	id := params["client_id"]
	if id == "" {
		return fail()
	}
	c, err := h.Svc.AuthenticateClient(ctx, id, params["client_secret"])
	return h.clientResult(w, r, c, err, fail)
}

func (h OAuth) clientResult(w http.ResponseWriter, r *http.Request, c oauth.Client, err error, fail func() (oauth.Client, bool)) (oauth.Client, bool) {
	if oauth.IsCode(err, oauth.CodeInvalidClient) {
		return fail()
	}
	if err != nil {
		h.internal(w, r, err)
		return oauth.Client{}, false
	}
	return c, true
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

func (h OAuth) token(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	params, ok := tokenParams(w, r)
	if !ok {
		return
	}
	grant := params["grant_type"]
	switch grant {
	case "":
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, "grant_type is required")
		return
	case oauth.GrantAuthorizationCode, oauth.GrantRefreshToken:
	default:
		writeAuthError(w, http.StatusBadRequest, oauth.CodeUnsupportedGrantType, "grant_type must be authorization_code or refresh_token")
		return
	}
	c, ok := h.authClient(w, r, params)
	if !ok {
		return
	}
	var (
		resp oauth.TokenResponse
		err  error
	)
	if grant == oauth.GrantAuthorizationCode {
		resp, err = h.Svc.ExchangeCode(r.Context(), c, params["code"], params["redirect_uri"], params["code_verifier"])
	} else {
		resp, err = h.Svc.Refresh(r.Context(), c, params["refresh_token"], params["scope"])
	}
	if err != nil {
		h.oauthError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

// oauthError maps an error of the oauth service: invalid_client and
// invalid_token are 401, other OAuth errors 400; anything else 500/503.
func (h OAuth) oauthError(w http.ResponseWriter, r *http.Request, err error) {
	var oe *oauth.Error
	if !errors.As(err, &oe) {
		h.internal(w, r, err)
		return
	}
	status := http.StatusBadRequest
	switch oe.Code {
	case oauth.CodeInvalidClient:
		w.Header().Set("WWW-Authenticate", `Basic realm="gatehouse"`)
		status = http.StatusUnauthorized
	case oauth.CodeInvalidToken:
		w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse", error="invalid_token"`)
		status = http.StatusUnauthorized
	}
	writeAuthError(w, status, oe.Code, oe.Description)
}

// userinfoResponse is the body of GET /oauth/userinfo.
type userinfoResponse struct {
	Sub      string `json:"sub"`
	Username string `json:"username"`
	Scope    string `json:"scope"`
	ClientID string `json:"client_id"`
}

func (h OAuth) userinfo(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	tok, ok := bearerToken(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse"`)
		writeAuthError(w, http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer <access token>")
		return
	}
	info, err := h.Svc.AccessToken(r.Context(), tok)
	if err != nil {
		h.oauthError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, userinfoResponse{Sub: info.Subject(), Username: info.Username, Scope: info.Scope, ClientID: info.ClientID})
}

// clientToken reads a client-authenticated request about one token (RFC
// 7009 revocation, RFC 7662 introspection); ok is false when it already
// answered.
func (h OAuth) clientToken(w http.ResponseWriter, r *http.Request) (c oauth.Client, token string, ok bool) {
	noStore(w)
	params, ok := tokenParams(w, r)
	if !ok {
		return oauth.Client{}, "", false
	}
	if c, ok = h.authClient(w, r, params); !ok {
		return oauth.Client{}, "", false
	}
	if params["token"] == "" {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, "token is required")
		return oauth.Client{}, "", false
	}
	return c, params["token"], true
}

func (h OAuth) revoke(w http.ResponseWriter, r *http.Request) {
	c, token, ok := h.clientToken(w, r)
	if !ok {
		return
	}
	if err := h.Svc.Revoke(r.Context(), c, token); err != nil {
		h.internal(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// introspection is the RFC 7662 response.
type introspection struct {
	Active    bool   `json:"active"`
	Scope     string `json:"scope,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Username  string `json:"username,omitempty"`
	Sub       string `json:"sub,omitempty"`
	TokenType string `json:"token_type,omitempty"`
	Exp       int64  `json:"exp,omitempty"`
	Iat       int64  `json:"iat,omitempty"`
}

func (h OAuth) introspect(w http.ResponseWriter, r *http.Request) {
	c, token, ok := h.clientToken(w, r)
	if !ok {
		return
	}
	info, active, err := h.Svc.Introspect(r.Context(), c, token)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if !active {
		httpx.WriteJSON(w, http.StatusOK, introspection{Active: false})
		return
	}
	out := introspection{
		Active: true, Scope: info.Scope, ClientID: info.ClientID, Username: info.Username, Sub: info.Subject(),
		Exp: info.ExpiresAt.Unix(), Iat: info.IssuedAt.Unix(),
	}
	if info.Kind == oauth.KindAccess {
		out.TokenType = "Bearer"
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}
