package signin

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
	"gatehouse/internal/identity"
	"gatehouse/rest/partnerapi"
)

// Auth serves the signed user token scheme (docs/auth.md):
// POST /api/auth/login, GET /api/auth/me and POST /auth/logout (also at
// POST /api/auth/logout, next to the other two: the same handler).
type Auth struct {
	Users    *identity.Users
	Tokens   *identity.TokenService
	Throttle *identity.LoginThrottle
	Log      *slog.Logger
}

// Routes returns the router of the signed user token scheme. Its paths
// share no prefix, so they are whole paths: mount it with MountWhole.
func (h Auth) Routes() chi.Router {
	r := chi.NewRouter()
	r.MethodNotAllowed(methodNotAllowed)
	r.Post("/api/auth/login", h.login)
	r.Get("/api/auth/me", h.me)
	r.Post("/auth/logout", h.logout)
	r.Post("/api/auth/logout", h.logout)
	return r
}

// loginResponse is the body of a successful login.
type loginResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
}

func (h Auth) login(w http.ResponseWriter, r *http.Request) {
	obj, derr := httpx.DecodeObject(r)
	if derr != nil {
		if derr.Status == http.StatusRequestEntityTooLarge {
			writeAuthError(w, derr.Status, derr.Code, derr.Msg)
			return
		}
		writeAuthError(w, http.StatusBadRequest, "invalid_request", derr.Msg)
		return
	}
	username, uPresent, uOK := httpx.StringField(obj, "username")
	password, pPresent, pOK := httpx.StringField(obj, "password")
	if !uPresent || !uOK || !pPresent || !pOK {
		writeAuthError(w, http.StatusBadRequest, "invalid_request", `"username" and "password" must be JSON strings`)
		return
	}
	ctx := r.Context()
	allowed, err := h.Throttle.Attempt(ctx, username, httpx.ClientAddr(r))
	if err != nil {
		internalAuthError(w, r, h.Log, err)
		return
	}
	if !allowed {
		writeThrottled(w, h.Throttle)
		return
	}
	si, err := h.Users.Authenticate(ctx, username, password)
	if errors.Is(err, identity.ErrInvalidCredentials) {
		writeAuthError(w, http.StatusUnauthorized, "invalid_credentials", "wrong username or password")
		return
	}
	if err != nil {
		internalAuthError(w, r, h.Log, err)
		return
	}
	if err := h.Throttle.Succeeded(ctx, username, httpx.ClientAddr(r)); err != nil {
		// The login itself succeeded; a stale count only expires later.
		h.Log.WarnContext(ctx, "clear login attempts", "err", err, "request_id", httpx.GetRequestID(ctx))
	}
	token, _, err := h.Tokens.IssueSignIn(si)
	if err != nil {
		internalAuthError(w, r, h.Log, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, loginResponse{
		AccessToken: token,
		TokenType:   "Bearer",
		ExpiresIn:   int64(h.Tokens.TTL() / time.Second),
	})
}

// meResponse is the body of GET /api/auth/me.
type meResponse struct {
	Sub      string   `json:"sub"`
	Username string   `json:"username"`
	Roles    []string `json:"roles"`
	Exp      int64    `json:"exp"`
}

func (h Auth) me(w http.ResponseWriter, r *http.Request) {
	c, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	roles := c.Roles
	if roles == nil {
		roles = []string{}
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, meResponse{Sub: c.Subject, Username: c.Username, Roles: roles, Exp: c.ExpiresAt.Unix()})
}

func (h Auth) logout(w http.ResponseWriter, r *http.Request) {
	c, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	if err := h.Tokens.Revoke(r.Context(), c); err != nil {
		internalAuthError(w, r, h.Log, err)
		return
	}
	partnerapi.WriteEnvelope(w, r, nil)
}

// authenticate returns the claims of the request's valid signed user
// token, or writes the 401 (missing_token / invalid_token) and reports false.
func (h Auth) authenticate(w http.ResponseWriter, r *http.Request) (*identity.Claims, bool) {
	raw, ok := bearerToken(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse"`)
		writeAuthError(w, http.StatusUnauthorized, "missing_token", "send Authorization: Bearer <access token>")
		return nil, false
	}
	c, err := h.Tokens.Verify(r.Context(), raw)
	if errors.Is(err, identity.ErrInvalidToken) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse", error="invalid_token"`)
		writeAuthError(w, http.StatusUnauthorized, "invalid_token", "the token is invalid, expired or logged out")
		return nil, false
	}
	if err != nil {
		internalAuthError(w, r, h.Log, err)
		return nil, false
	}
	return c, true
}

// bearerToken returns the token of a single "Authorization: Bearer <token>"
// header (scheme name case-insensitive, RFC 6750 section 2.1).
func bearerToken(r *http.Request) (string, bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authErrorBody is the error shape of sign-in and OAuth: {"error": code} with an
// optional human description (never holding a secret).
type authErrorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func writeAuthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, status, authErrorBody{Error: code, Description: desc})
}

// writeThrottled answers 429 too_many_attempts. Retry-After is the whole
// window: an upper bound, as the count started at the first failure.
func writeThrottled(w http.ResponseWriter, t *identity.LoginThrottle) {
	w.Header().Set("Retry-After", strconv.FormatInt(int64(t.Window()/time.Second), 10))
	writeAuthError(w, http.StatusTooManyRequests, "too_many_attempts", "too many failed sign-in attempts for this user from this address; try again later")
}

// internalAuthError maps an error's kind to the sign-in and OAuth error
// shape, the one place these front doors translate domain errors (their
// own protocol outcomes, invalid_client and the like, are answered where
// they arise): 503 when a dependency is down, else 500; the text of an
// unexpected error goes to the log only. A client that went away gets
// neither (httpx.Abandon).
func internalAuthError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	ctx := r.Context()
	kind := errs.KindOf(err)
	if (kind == errs.Unavailable || kind == errs.Internal) && httpx.ClientGone(r) {
		httpx.Abandon(w, r, log, "auth", err)
		return
	}
	switch kind {
	case errs.Validation:
		writeAuthError(w, http.StatusBadRequest, "invalid_request", errs.Message(err))
	case errs.Unavailable:
		httpx.DependencyRefused(ctx, log, "auth", err)
		w.Header().Set("Retry-After", "1")
		writeAuthError(w, http.StatusServiceUnavailable, "unavailable", "a dependency is unavailable, retry later")
	default:
		log.ErrorContext(ctx, "auth error", "err", err, "request_id", httpx.GetRequestID(ctx))
		writeAuthError(w, http.StatusInternalServerError, "server_error", "internal error")
	}
}
