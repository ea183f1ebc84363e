// Package console is the admin console: web pages on the admin listener
// (/console/) over the GraphQL API alone. Every read and every change is a
// GraphQL operation made with the signed-in API key, so it is priced,
// role-checked and audited exactly as any other client's; the console
// only shows, and never decides who may do what.
//
// Sign-in exchanges an API key for a session cookie. The key is sealed
// (AES-GCM with the master key) into the server-side session; the browser
// holds only the random session token, in an HttpOnly, SameSite=Strict
// cookie scoped to /console/.
package console

import (
	"embed"
	"encoding/base64"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"gatehouse/internal/httpx"
	"gatehouse/internal/secret"
	"gatehouse/internal/ui"
)

//go:embed pages/*.html
var pagesFS embed.FS

// Base is where the console is mounted.
const Base = "/console/"

// CookieName is the console session cookie's name: not the public
// listener's OAuth session cookie (browsers share cookies across ports of
// one host, so the names and stores must differ).
const CookieName = "gatehouse_console"

// Session keys of the console.
const (
	keySealed = "console.key"
	keyName   = "console.name"
	keyRole   = "console.role"
)

// Config is what the console is built from.
type Config struct {
	// GraphQL is the admin GraphQL handler behind its API key guard.
	GraphQL http.Handler
	// Sessions is the console's session manager (its own cookie and store).
	Sessions *scs.SessionManager
	// Sealer seals the API key kept in a session.
	Sealer *secret.Sealer
	Log    *slog.Logger
}

// Console serves the pages.
type Console struct {
	api      api
	sessions *ui.Sessions
	sealer   *secret.Sealer
	pages    *ui.Renderer
	log      *slog.Logger
}

// New builds the console; Routes serves it.
func New(cfg Config) (*Console, error) {
	sub, err := fs.Sub(pagesFS, "pages")
	if err != nil {
		return nil, err
	}
	pages, err := ui.New(sub, cfg.Log)
	if err != nil {
		return nil, err
	}
	return &Console{api: api{h: cfg.GraphQL}, sessions: ui.NewSessions(cfg.Sessions), sealer: cfg.Sealer, pages: pages, log: cfg.Log}, nil
}

var nav = []ui.Nav{
	{Name: "Deliveries", Href: Base + "deliveries"},
	{Name: "Endpoints", Href: Base + "endpoints"},
	{Name: "Apps", Href: Base + "apps"},
	{Name: "API keys", Href: Base + "keys"},
	{Name: "Users", Href: Base + "users"},
	{Name: "Audit log", Href: Base + "audit"},
	{Name: "API versions", Href: Base + "versions"},
	{Name: "Event catalogue", Href: Base + "events"},
}

// Routes returns the console's router, to mount at Base.
func (c *Console) Routes() http.Handler {
	r := chi.NewRouter()
	r.Use(httpx.LimitBody, c.sessions.LoadAndSave, c.sessions.Guard(c.refuseCSRF))
	r.Handle("/static/*", ui.Static(Base+"static/"))
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Base+"deliveries", http.StatusSeeOther)
	})
	r.Get("/sign-in", c.signInPage)
	r.Post("/sign-in", c.signIn)
	r.Post("/sign-out", c.signOut)
	r.Group(func(r chi.Router) {
		r.Use(c.requireSession)
		c.deliveryRoutes(r)
		c.endpointRoutes(r)
		c.adminRoutes(r)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, &apiError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "No such page."})
	})
	return r
}

// refuseCSRF answers a state-changing request without the session's
// CSRF token or from another origin (ui.Sessions.Guard).
func (c *Console) refuseCSRF(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusForbidden, "error", "Refused", errorData{
		Message: "This form has expired or did not come from this console. Go back, reload the page and try again."})
}

// requireSession sends a browser without a signed-in session to the
// sign-in page (a GET) or refuses its request (anything else).
func (c *Console) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.sessions.Exists(r.Context(), keySealed) {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Base+"sign-in", http.StatusSeeOther)
				return
			}
			c.render(w, r, http.StatusUnauthorized, "error", "Signed out", errorData{Message: "You are signed out. Sign in again."})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// key opens the session's API key; it lives only for the request.
func (c *Console) key(r *http.Request) (string, error) {
	sealed, err := base64.RawStdEncoding.DecodeString(c.sessions.GetString(r.Context(), keySealed))
	if err != nil {
		return "", errSignedOut
	}
	k, err := c.sealer.Open(sealed)
	if err != nil {
		// Sealed with another master key: as good as signed out.
		return "", errSignedOut
	}
	return string(k), nil
}

// query runs a GraphQL operation as the signed-in key.
func (c *Console) query(r *http.Request, doc string, vars map[string]any, out any) error {
	k, err := c.key(r)
	if err != nil {
		return err
	}
	return c.api.do(r, k, doc, vars, out)
}

// canChange reports whether the signed-in key's role may change things:
// only to hide buttons (the API refuses a READ_ONLY key's mutations).
func (c *Console) canChange(r *http.Request) bool {
	return c.sessions.GetString(r.Context(), keyRole) == "ADMIN"
}

// page fills the layout's part of a page. Only a signed-in session's
// pages and the sign-in page have forms, and so a CSRF token: the
// sign-in page's is a form cookie's (ui.Sessions.FormCSRF), so that the
// pages anyone may fetch store no session and fetching them in a loop
// fills no session store.
func (c *Console) page(w http.ResponseWriter, r *http.Request, title string, data any) ui.Page {
	p := ui.Page{Title: title, Product: "gatehouse console", Base: Base, Data: data, Current: r.URL.Path}
	if _, ok := data.(signInData); ok {
		p.CSRF = c.sessions.FormCSRF(w, r)
	}
	if name := c.sessions.GetString(r.Context(), keyName); name != "" {
		p.CSRF = c.sessions.CSRF(r.Context())
		p.Signed = name + " (" + c.sessions.GetString(r.Context(), keyRole) + ")"
		p.Nav = nav
		p.CanChange = c.canChange(r)
		p.Flash = c.sessions.TakeFlash(r.Context())
	}
	return p
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	c.pages.Render(w, r, status, name, c.page(w, r, title, data))
}

// errorData is the error page's.
type errorData struct{ Message string }

// fail answers an error from the API (or the console) as a page, with the
// status it deserves; an unknown error is logged and shown as a 500
// without its text.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errSignedOut) {
		_ = c.sessions.Destroy(r.Context())
		if r.Method == http.MethodGet {
			http.Redirect(w, r, Base+"sign-in", http.StatusSeeOther)
			return
		}
		c.render(w, r, http.StatusUnauthorized, "error", "Signed out", errorData{Message: "You are signed out. Sign in again."})
		return
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		c.log.ErrorContext(r.Context(), "console", "err", err, "request_id", httpx.GetRequestID(r.Context()))
		c.render(w, r, http.StatusInternalServerError, "error", "Something went wrong", errorData{Message: "The request failed. Try again; if it keeps failing, the server log has the details."})
		return
	}
	status := ae.Status
	switch ae.Code {
	case "FORBIDDEN":
		status = http.StatusForbidden
	case "NOT_FOUND":
		status = http.StatusNotFound
	case "VALIDATION_FAILED", "INVALID_STATE", "CONFLICT":
		status = http.StatusUnprocessableEntity
	}
	if status < 400 {
		status = http.StatusBadRequest
	}
	c.render(w, r, status, "error", "Not done", errorData{Message: ae.Message})
}

// done records a flash message and sends the browser on (POST, redirect, GET).
func (c *Console) done(w http.ResponseWriter, r *http.Request, msg, to string) {
	c.sessions.Flash(r.Context(), msg)
	http.Redirect(w, r, to, http.StatusSeeOther)
}
