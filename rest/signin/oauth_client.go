package signin

import (
	"errors"
	"gatehouse/internal/httpx"
	"gatehouse/internal/oauth"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// tokenParams reads the parameters of a client request from a
// urlencoded form or a JSON object of strings; a parameter given twice is
// invalid_request (RFC 6749 section 3.2). Query parameters are ignored: client
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
// section 2.3.1: id and secret form-encoded) or client_id and client_secret in
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
