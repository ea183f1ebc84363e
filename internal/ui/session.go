package ui

import (
	"context"
	"net/http"

	"github.com/alexedwards/scs/v2"

	"gatehouse/internal/secret"
)

// Session keys the foundation owns.
const (
	keyCSRF  = "ui.csrf"
	keyFlash = "ui.flash"
)

// CSRFField is the name of the hidden form field (and CSRFHeader of the
// header) that carries a session's CSRF token.
const (
	CSRFField  = "csrf"
	CSRFHeader = "X-CSRF-Token"
)

// Sessions are browser sessions (scs) with a CSRF token each: every
// state-changing request must carry the session's token in a form field
// or header, and come from the same origin (Sec-Fetch-Site / Origin,
// checked by net/http's CrossOriginProtection).
type Sessions struct {
	*scs.SessionManager
	cop *http.CrossOriginProtection
}

// NewSessions wraps sm.
func NewSessions(sm *scs.SessionManager) *Sessions {
	return &Sessions{SessionManager: sm, cop: http.NewCrossOriginProtection()}
}

// CSRF returns the session's CSRF token, making one if it has none.
func (s *Sessions) CSRF(ctx context.Context) string {
	if t := s.GetString(ctx, keyCSRF); t != "" {
		return t
	}
	t := secret.RandomToken("", 32)
	s.Put(ctx, keyCSRF, t)
	return t
}

// NewCSRF gives the session a fresh token (at sign-in and sign-out).
func (s *Sessions) NewCSRF(ctx context.Context) {
	s.Put(ctx, keyCSRF, secret.RandomToken("", 32))
}

// CheckCSRF reports whether r may change state: a same-origin request
// carrying the session's token.
func (s *Sessions) CheckCSRF(r *http.Request) bool {
	if s.cop.Check(r) != nil {
		return false
	}
	want := s.GetString(r.Context(), keyCSRF)
	got := r.Header.Get(CSRFHeader)
	if got == "" {
		got = r.PostFormValue(CSRFField)
	}
	return want != "" && got != "" && secret.Equal(want, got)
}

// Guard is middleware that lets a state-changing request through only
// when CheckCSRF accepts it, before anything else runs; refuse answers
// the others (a 403 page).
func (s *Sessions) Guard(refuse http.HandlerFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.CheckCSRF(r) {
				refuse(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Flash keeps a message for the next page the session sees.
func (s *Sessions) Flash(ctx context.Context, msg string) { s.Put(ctx, keyFlash, msg) }

// TakeFlash returns the message kept by Flash, once.
func (s *Sessions) TakeFlash(ctx context.Context) string { return s.PopString(ctx, keyFlash) }
