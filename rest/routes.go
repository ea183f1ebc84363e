package rest

import "github.com/go-chi/chi/v5"

// Every resource of the public listener exposes Routes() chi.Router:
// Tickets (mounted at /api/tickets), Partner (at PartnerMountPattern), and
// the sign-in resources Auth and OAuth, whose paths share no prefix
// (/api/auth/…, /auth/logout; /oauth/…, /login) and are attached with
// MountWhole.

// MountWhole attaches sub, a router whose patterns are whole paths, to r
// at each of its patterns. sub answers its own wrong methods.
func MountWhole(r chi.Router, sub chi.Router) {
	for _, rt := range sub.Routes() {
		r.Handle(rt.Pattern, sub)
	}
}
