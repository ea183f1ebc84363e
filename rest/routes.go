package rest

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// Every resource of the public listener exposes Routes() chi.Router:
// tickets.Tickets (mounted at /api/tickets), partnerapi.Partner (at
// partnerapi.PartnerMountPattern), and the sign-in resources signin.Auth
// and signin.OAuth, whose paths share no prefix (/api/auth/…,
// /auth/logout; /oauth/…, /login) and are attached with MountWhole.

// MountWhole attaches sub, a router whose patterns are whole paths, to r
// at each of its patterns. sub answers its own wrong methods.
func MountWhole(r chi.Router, sub chi.Router) {
	h := wholeRouter{sub}
	for _, rt := range sub.Routes() {
		r.Handle(rt.Pattern, h)
	}
}

// wholeRouter serves a request with its router and leaves the route
// pattern that router matched as the request's only one: chi records the
// pattern r matched ("/oauth/token"), then the one the router matched on
// the whole path again, and joins them ("/oauth/token/oauth/token") for
// the span's name and http.route. It is still the router's chi.Routes,
// for whoever walks the routes.
type wholeRouter struct{ chi.Router }

func (h wholeRouter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rc := chi.RouteContext(req.Context())
	n := 0
	if rc != nil {
		n = len(rc.RoutePatterns)
	}
	h.Router.ServeHTTP(w, req)
	if n > 0 && len(rc.RoutePatterns) > n {
		rc.RoutePatterns = append(rc.RoutePatterns[:n-1], rc.RoutePatterns[n:]...)
	}
}
