package signin

import (
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"gatehouse/internal/httpx"
	"gatehouse/internal/identity"
	"gatehouse/internal/oauth"
)

//go:embed templates/*.html
var templateFS embed.FS

// pages are the HTML pages of the authorization flow. html/template
// escapes every value for its context (text, attribute, URL).
var pages = template.Must(template.ParseFS(templateFS, "templates/*.html"))

// Paths of the browser part of the flow.
const (
	loginPath   = "/login"
	approvePath = "/oauth/approve"
)

// OAuth serves the authorization code flow: the browser pages
// (/oauth/authorize, /login, /oauth/approve, /oauth/confirm; in
// oauth_pages.go, pending requests in oauth_pending.go) and the client
// endpoints (/oauth/token, /oauth/userinfo, /oauth/revoke,
// /oauth/introspect; in oauth_client.go).
type OAuth struct {
	Svc      *oauth.Service
	Users    *identity.Users
	Throttle *identity.LoginThrottle
	Sessions *scs.SessionManager
	Log      *slog.Logger
	// Issuer is the OAuth issuer identifier (GATEHOUSE_PUBLIC_URL); empty:
	// each request's own scheme and host.
	Issuer string
}

// Routes returns the OAuth router (/oauth/… and the /login page). Its
// paths share no prefix, so they are whole paths: mount it with MountWhole.
func (h OAuth) Routes() chi.Router {
	r := chi.NewRouter()
	r.MethodNotAllowed(methodNotAllowed)
	// Cross-site POSTs to the form endpoints are refused (403): they would
	// let another site sign a user in (login CSRF) or approve on their behalf.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeAuthError(w, http.StatusForbidden, "forbidden", "cross-origin request refused")
	}))
	r.Group(func(r chi.Router) {
		r.Use(refuseNULQuery, h.Sessions.LoadAndSave)
		r.Get("/oauth/authorize", h.authorize)
		r.Get(loginPath, h.loginPage)
		r.Method(http.MethodPost, loginPath, cop.Handler(http.HandlerFunc(h.loginSubmit)))
		r.Get(approvePath, h.approvePage)
		r.Method(http.MethodPost, "/oauth/confirm", cop.Handler(http.HandlerFunc(h.confirm)))
	})
	r.Get(oauth.PathMetadata, h.metadata)
	r.Group(func(r chi.Router) {
		r.Use(refuseNULQuery)
		r.Post("/oauth/token", h.token)
		r.Get("/oauth/userinfo", h.userinfo)
		r.Post("/oauth/userinfo", h.userinfo)
		r.Post("/oauth/revoke", h.revoke)
		r.Post("/oauth/introspect", h.introspect)
	})
	return r
}

// metadata serves the authorization server metadata (RFC 8414) at
// /.well-known/oauth-authorization-server.
func (h OAuth) metadata(w http.ResponseWriter, r *http.Request) {
	issuer, pinned := h.Issuer, h.Issuer != ""
	if !pinned {
		scheme := "http"
		if httpx.RequestHTTPS(r) {
			scheme = "https"
		}
		issuer = scheme + "://" + r.Host
	}
	m, err := h.Svc.Metadata(r.Context(), issuer)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if pinned {
		w.Header().Set("Cache-Control", "public, max-age=300")
	} else {
		// Built from the request's own Host: a shared cache must neither
		// keep it nor hand it to a client that asked under another name
		// (a stranger's Host would otherwise poison it for everyone).
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Vary", "Host")
	}
	httpx.WriteJSON(w, http.StatusOK, m)
}

func (h OAuth) internal(w http.ResponseWriter, r *http.Request, err error) {
	internalAuthError(w, r, h.Log, err)
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
	err := r.ParseForm()
	if err == nil && (httpx.ValuesHaveNUL(r.PostForm) || httpx.QueryHasNUL(r.URL.RawQuery)) {
		writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, httpx.MsgNUL)
		return false
	}
	if err != nil {
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

// refuseNULQuery answers 400 invalid_request for a query string holding a
// NUL character, before anything looks it up.
func refuseNULQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpx.QueryHasNUL(r.URL.RawQuery) {
			writeAuthError(w, http.StatusBadRequest, oauth.CodeInvalidRequest, httpx.MsgNUL)
			return
		}
		next.ServeHTTP(w, r)
	})
}
