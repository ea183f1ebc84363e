// Package portal is the partner portal: web pages on the public listener
// (/portal/) where one partner app looks after its own webhooks and sees
// its usage. An admin mints a one-time link (createPortalLink); opening
// it exchanges the link for a session scoped to that app. Every read and
// every change goes through the app-scoped webhook methods
// (webhook.Service.AppEndpoint, AppDelivery, AppResend, …), so another
// app's id is not found, exactly as on the signed partner API. The app
// secret is never read, so it can never be shown.
package portal

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
	"gatehouse/internal/partner"
	"gatehouse/internal/ui"
	"gatehouse/internal/webhook"
)

//go:embed pages/*.html
var pagesFS embed.FS

// Base is where the portal is mounted.
const Base = "/portal/"

// CookieName is the portal session cookie's: neither the console's nor
// the OAuth session's (browsers share cookies across the ports of a host).
const CookieName = "gatehouse_portal"

// Session keys of the portal.
const (
	keyApp      = "portal.app"
	keyReadOnly = "portal.read_only"
	keyUntil    = "portal.until"
)

// Config is what the portal is built from.
type Config struct {
	Links    *Links
	Partners *partner.Service
	Webhooks *webhook.Service
	// Usage counts the app's calls; Versions tells their lifecycle.
	Usage    *partner.Usage
	Versions partner.Versions
	// Sessions is the portal's session manager (its own cookie and store).
	Sessions *scs.SessionManager
	// SessionTTL bounds a session from the opening of its link
	// (GATEHOUSE_PORTAL_SESSION_TTL); required.
	SessionTTL time.Duration
	// Name and Color theme the pages (GATEHOUSE_PORTAL_NAME, required;
	// GATEHOUSE_PORTAL_COLOR, #rrggbb or empty). Their defaults are the
	// settings', declared in internal/config: the portal has none.
	Name, Color string
	Log         *slog.Logger
}

// Portal serves the pages.
type Portal struct {
	cfg      Config
	sessions *ui.Sessions
	pages    *ui.Renderer
	log      *slog.Logger
}

// New builds the portal; Routes serves it. A SessionTTL or Name left
// zero is refused.
func New(cfg Config) (*Portal, error) {
	if cfg.SessionTTL <= 0 || cfg.Name == "" {
		return nil, fmt.Errorf("portal: the session lifetime (%s) and the name (%q) are required", cfg.SessionTTL, cfg.Name)
	}
	sub, err := fs.Sub(pagesFS, "pages")
	if err != nil {
		return nil, err
	}
	pages, err := ui.New(sub, cfg.Log)
	if err != nil {
		return nil, err
	}
	return &Portal{cfg: cfg, sessions: ui.NewSessions(cfg.Sessions), pages: pages, log: cfg.Log}, nil
}

var nav = []ui.Nav{
	{Name: "Endpoints", Href: Base + "endpoints"},
	{Name: "Deliveries", Href: Base + "deliveries"},
	{Name: "Event catalogue", Href: Base + "events"},
	{Name: "Usage", Href: Base + "usage"},
}

// Routes returns the portal's router, to mount at Base.
func (p *Portal) Routes() http.Handler {
	r := chi.NewRouter()
	r.Use(httpx.LimitBody, p.sessions.LoadAndSave, p.sessions.Guard(p.refuseCSRF))
	r.Handle("/static/*", ui.Static(Base+"static/"))
	r.Get("/theme.css", p.theme)
	r.Get("/enter", p.enterPage)
	r.Post("/enter", p.enter)
	r.Post("/sign-out", p.signOut)
	r.Group(func(r chi.Router) {
		r.Use(p.requireSession)
		r.Get("/", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, Base+"endpoints", http.StatusSeeOther)
		})
		r.Get("/endpoints", p.endpoints)
		r.Get("/endpoints/{id}", p.endpoint)
		r.Get("/deliveries", p.deliveries)
		r.Get("/deliveries/{id}", p.delivery)
		r.Get("/events", p.events)
		r.Get("/usage", p.usage)
		r.Group(func(r chi.Router) {
			r.Use(p.requireWrite)
			r.Post("/endpoints", p.createEndpoint)
			r.Post("/endpoints/{id}", p.updateEndpoint)
			r.Post("/endpoints/{id}/enable", p.setEnabled(true))
			r.Post("/endpoints/{id}/disable", p.setEnabled(false))
			r.Post("/endpoints/{id}/delete", p.deleteEndpoint)
			r.Post("/endpoints/{id}/rotate", p.rotateSecret)
			r.Post("/endpoints/{id}/test", p.sendTest)
			r.Post("/deliveries/{id}/resend", p.resend)
		})
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		p.render(w, r, http.StatusNotFound, "error", "Not found", errorData{Message: "No such page."})
	})
	return r
}

// refuseCSRF answers a state-changing request without the session's
// CSRF token or from another origin (ui.Sessions.Guard).
func (p *Portal) refuseCSRF(w http.ResponseWriter, r *http.Request) {
	p.render(w, r, http.StatusForbidden, "error", "Refused", errorData{
		Message: "This form has expired or did not come from this portal. Go back, reload the page and try again."})
}

// appID is the session's app (0: none).
func (p *Portal) appID(r *http.Request) int { return p.sessions.GetInt(r.Context(), keyApp) }

func (p *Portal) readOnly(r *http.Request) bool { return p.sessions.GetBool(r.Context(), keyReadOnly) }

// requireSession refuses a request without a live portal session: none,
// past its end, or of an app that was disabled since.
func (p *Portal) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := p.appID(r)
		until := p.sessions.GetInt64(r.Context(), keyUntil)
		if id == 0 || time.Now().Unix() >= until {
			if id != 0 {
				_ = p.sessions.Destroy(r.Context())
			}
			p.render(w, r, http.StatusUnauthorized, "error", "Session ended",
				errorData{Message: "Your portal session has ended or this browser has none. Ask your contact for a new portal link."})
			return
		}
		app, err := p.cfg.Partners.Get(r.Context(), id)
		if err != nil && !errors.Is(err, partner.ErrNotFound) {
			p.fail(w, r, err)
			return
		}
		if err != nil || !app.Enabled() {
			_ = p.sessions.Destroy(r.Context())
			p.render(w, r, http.StatusForbidden, "error", "Access ended",
				errorData{Message: "This app's access to the portal has ended. Ask your contact for help."})
			return
		}
		next.ServeHTTP(w, r.WithContext(withApp(r.Context(), app)))
	})
}

// requireWrite refuses every change from a read-only session: the
// server decides, whatever buttons a page shows.
func (p *Portal) requireWrite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.readOnly(r) {
			p.log.WarnContext(r.Context(), "portal: change refused to a read-only session",
				"app_id", p.appID(r), "path", r.URL.Path, "request_id", httpx.GetRequestID(r.Context()))
			p.render(w, r, http.StatusForbidden, "error", "Read only",
				errorData{Message: "This portal link lets you look, not change anything."})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// page fills the layout's part of a page.
func (p *Portal) page(w http.ResponseWriter, r *http.Request, title string, data any) ui.Page {
	pg := ui.Page{Title: title, Product: p.cfg.Name, Base: Base, Data: data, Current: r.URL.Path}
	if p.cfg.Color != "" {
		pg.Theme = Base + "theme.css"
	}
	// Only a page with a form gets a CSRF token; a link's page, before
	// any session, a form cookie's (ui.Sessions.FormCSRF): the pages
	// anyone may fetch store nothing, so fetching them in a loop (or a
	// link's page, by whoever holds the link) fills no session store.
	if _, ok := data.(enterData); ok {
		pg.CSRF = p.sessions.FormCSRF(w, r)
	}
	if app, ok := appFrom(r.Context()); ok {
		pg.CSRF = p.sessions.CSRF(r.Context())
		pg.Signed = app.AppName
		if p.readOnly(r) {
			pg.Signed += " (read only)"
		}
		pg.Nav = nav
		pg.CanChange = !p.readOnly(r)
		pg.Flash = p.sessions.TakeFlash(r.Context())
	}
	return pg
}

func (p *Portal) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	p.pages.Render(w, r, status, name, p.page(w, r, title, data))
}

// errorData is the error page's.
type errorData struct{ Message string }

// fail answers a domain error as a page with the status it deserves; an
// unknown error is logged and shown as a 500 without its text.
func (p *Portal) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch errs.KindOf(err) {
	case errs.NotFound:
		p.render(w, r, http.StatusNotFound, "error", "Not found", errorData{Message: errs.Message(err)})
		return
	case errs.Validation:
		status = http.StatusUnprocessableEntity
	case errs.InvalidState, errs.Conflict:
		status = http.StatusConflict
	case errs.Forbidden:
		status = http.StatusForbidden
	}
	if status == http.StatusInternalServerError {
		p.log.ErrorContext(r.Context(), "portal", "err", err, "request_id", httpx.GetRequestID(r.Context()))
		p.render(w, r, status, "error", "Something went wrong", errorData{Message: "The request failed. Try again later."})
		return
	}
	p.render(w, r, status, "error", "Not done", errorData{Message: errs.Message(err)})
}

// done records a flash message and sends the browser on (POST, redirect, GET).
func (p *Portal) done(w http.ResponseWriter, r *http.Request, msg, to string) {
	p.sessions.Flash(r.Context(), msg)
	http.Redirect(w, r, to, http.StatusSeeOther)
}
