package app

import (
	"net/http"
	"strings"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"gatehouse/internal/portal"
)

// portalLinks mints and redeems portal links (createPortalLink, /portal/enter).
func (a *App) portalLinks() *portal.Links {
	if a.PortalLinks == nil {
		a.PortalLinks = &portal.Links{Client: a.DB.Client, Partners: a.Partners}
	}
	return a.PortalLinks
}

// portalSessions are the partner portal's sessions: a cookie and a store
// of their own (neither the console's nor the OAuth sessions'), in Redis
// when it is configured (every replica, and across restarts) and in this
// process otherwise. Lax, not Strict: the partner arrives by a link from
// a message, and the first request after it must carry the cookie.
func (a *App) portalSessions() *scs.SessionManager {
	return a.pageSessions("portal-session:", portal.CookieName, portal.Base, http.SameSiteLaxMode, a.Cfg.Portal.SessionTTL)
}

// mountPortal serves the partner portal at /portal/ on the public listener.
func (a *App) mountPortal(r chi.Router) error {
	p, err := portal.New(portal.Config{
		Links: a.portalLinks(), Partners: a.Partners, Webhooks: a.Webhooks, Usage: a.Usage, Versions: a.APIVersions,
		Sessions: a.portalSessions(), SessionTTL: a.Cfg.Portal.SessionTTL, Name: a.Cfg.Portal.Name, Color: a.Cfg.Portal.Color, Log: a.Log,
	})
	if err != nil {
		return err
	}
	r.Get("/portal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, portal.Base, http.StatusMovedPermanently)
	})
	r.Mount("/portal", p.Routes())
	return nil
}

// portalBase is the base of portal link URLs: GATEHOUSE_PUBLIC_URL
// without its trailing slash ("" when unset: the URL is then a path).
func (a *App) portalBase() string { return strings.TrimRight(a.Cfg.Server.PublicURL, "/") }
