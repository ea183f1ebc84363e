package portal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/internal/config"
	"gatehouse/internal/httpx"
	"gatehouse/internal/partner"
)

type ctxKey struct{}

func withApp(ctx context.Context, app partner.App) context.Context {
	return context.WithValue(ctx, ctxKey{}, app)
}

// appFrom is the session's app, loaded by requireSession.
func appFrom(ctx context.Context) (partner.App, bool) {
	app, ok := ctx.Value(ctxKey{}).(partner.App)
	return app, ok
}

// enterData is the page a link opens: the app it is for and a button
// that spends the link.
type enterData struct {
	AppName  string
	ReadOnly bool
	Token    string
}

// enterPage answers a link's GET without spending it: mail scanners and
// link previews fetch links before the partner does, and a GET that spent
// it would hand the partner a "link already used" page. It shows which
// app the link opens and a button (a same-origin POST with the CSRF
// token of the page's form cookie) that does.
func (p *Portal) enterPage(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	if token == "" {
		p.render(w, r, http.StatusBadRequest, "error", "No link", errorData{Message: "This address needs the whole portal link. Copy it again from the message you received."})
		return
	}
	red, err := p.cfg.Links.Peek(r.Context(), token)
	if err != nil {
		p.refuseLink(w, r, red, err)
		return
	}
	p.render(w, r, http.StatusOK, "enter", "Open the portal", enterData{AppName: red.AppName, ReadOnly: red.ReadOnly, Token: token})
}

// enter exchanges a link's token (posted by enterPage's button) for a
// session scoped to its app, then sends the browser to the endpoints. A
// link that was already used is refused and logged as a warning: an admin
// wants to know that someone replays links.
func (p *Portal) enter(w http.ResponseWriter, r *http.Request) {
	token := r.PostFormValue("token")
	if token == "" {
		p.render(w, r, http.StatusBadRequest, "error", "No link", errorData{Message: "This address needs the whole portal link. Copy it again from the message you received."})
		return
	}
	red, err := p.cfg.Links.Redeem(r.Context(), token)
	if err != nil {
		p.refuseLink(w, r, red, err)
		return
	}
	// A new session token: nothing from before the link carries over.
	if err := p.sessions.RenewToken(r.Context()); err != nil {
		p.fail(w, r, err)
		return
	}
	p.sessions.Put(r.Context(), keyApp, red.AppID)
	p.sessions.Put(r.Context(), keyReadOnly, red.ReadOnly)
	p.sessions.Put(r.Context(), keyUntil, time.Now().Add(p.cfg.SessionTTL).Unix())
	p.sessions.NewCSRF(r.Context())
	p.sessions.DropFormCSRF(w, r)
	p.log.InfoContext(r.Context(), "portal: link opened", "app_id", red.AppID, "read_only", red.ReadOnly, "request_id", httpx.GetRequestID(r.Context()))
	http.Redirect(w, r, Base+"endpoints", http.StatusSeeOther)
}

// refuseLink answers a link that cannot open the portal, counts it by
// reason and logs it (a replay or a guess as a warning).
func (p *Portal) refuseLink(w http.ResponseWriter, r *http.Request, red Redeemed, err error) {
	rid := httpx.GetRequestID(r.Context())
	switch {
	case errors.Is(err, ErrLinkUsed):
		linksRefused.WithLabelValues("used").Inc()
		p.log.WarnContext(r.Context(), "portal: a used portal link was opened again", "app_id", red.AppID, "client_ip", httpx.ClientAddr(r), "request_id", rid)
		p.render(w, r, http.StatusGone, "error", "Link already used", errorData{Message: "This portal link was already used: each link opens the portal once. Ask your contact for a new one."})
	case errors.Is(err, ErrLinkExpired):
		linksRefused.WithLabelValues("expired").Inc()
		p.log.InfoContext(r.Context(), "portal: an expired portal link was opened", "app_id", red.AppID, "request_id", rid)
		p.render(w, r, http.StatusGone, "error", "Link expired", errorData{Message: "This portal link has expired. Ask your contact for a new one."})
	case errors.Is(err, ErrLinkUnknown):
		linksRefused.WithLabelValues("unknown").Inc()
		p.log.WarnContext(r.Context(), "portal: an unknown portal link was opened", "client_ip", httpx.ClientAddr(r), "request_id", rid)
		p.render(w, r, http.StatusNotFound, "error", "Link not valid", errorData{Message: "This portal link is not valid. Copy it again, whole, from the message you received."})
	case errors.Is(err, ErrAppDisabled):
		linksRefused.WithLabelValues("app_disabled").Inc()
		p.log.WarnContext(r.Context(), "portal: a link of a disabled app was opened", "app_id", red.AppID, "request_id", rid)
		p.render(w, r, http.StatusForbidden, "error", "Access ended", errorData{Message: "This app's access to the portal has ended. Ask your contact for help."})
	default:
		p.fail(w, r, err)
	}
}

// linksRefused counts portal links refused, by reason.
var linksRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gatehouse_portal_links_refused_total",
	Help: "Portal links that did not open the portal, by reason (used: a replay; unknown: a guessed or mangled token; expired; app_disabled).",
}, []string{"reason"})

func init() {
	prometheus.MustRegister(linksRefused)
	for _, reason := range []string{"used", "expired", "unknown", "app_disabled"} {
		linksRefused.WithLabelValues(reason)
	}
}

// signOut ends the session.
func (p *Portal) signOut(w http.ResponseWriter, r *http.Request) {
	_ = p.sessions.Destroy(r.Context())
	p.render(w, r, http.StatusOK, "error", "Signed out", errorData{Message: "You left the portal. Open a new portal link to come back."})
}

// theme is the stylesheet that applies the company's colour: a file of
// its own, as the CSP allows no inline style.
func (p *Portal) theme(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=300")
	if !config.ValidColor(p.cfg.Color) {
		return
	}
	// A stripe, not a background: any colour keeps the text readable.
	_, _ = fmt.Fprintf(w, ".top{border-bottom:6px solid %s}\n", p.cfg.Color)
}
