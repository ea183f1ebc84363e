package ui

import (
	"context"
	"encoding/base64"
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
//
// A browser without a session (on a sign-in page, a portal link's page)
// gets no session for its form: its token is kept in a cookie of its own
// (the session cookie's name with formCookieSuffix, same path and
// SameSite, HttpOnly) and the form must carry the same value (a
// double-submit cookie, beside the same-origin check). Such a page stores
// nothing on the server, so fetching it in a loop fills no session store.
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

// formCookieSuffix names the cookie of a browser without a session's form
// token, after the session cookie's name.
const formCookieSuffix = "_form"

// formTokenBytes is the form token's entropy: RandomToken's 32 bytes are
// 43 characters of base64url.
const formTokenBytes = 32

// FormCSRF returns the CSRF token for the forms of a page: the session's
// when the browser has a session, else the token of its form cookie
// (set here when it has none or a malformed one). No session is made.
func (s *Sessions) FormCSRF(w http.ResponseWriter, r *http.Request) string {
	if t := s.GetString(r.Context(), keyCSRF); t != "" {
		return t
	}
	if t := s.formToken(r); t != "" {
		return t
	}
	t := secret.RandomToken("", formTokenBytes)
	http.SetCookie(w, &http.Cookie{Name: s.Cookie.Name + formCookieSuffix, Value: t, Path: s.Cookie.Path,
		HttpOnly: true, SameSite: s.Cookie.SameSite})
	return t
}

// DropFormCSRF deletes the form cookie (once signed in, the session's
// token takes its place).
func (s *Sessions) DropFormCSRF(w http.ResponseWriter, r *http.Request) {
	if _, err := r.Cookie(s.Cookie.Name + formCookieSuffix); err != nil {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: s.Cookie.Name + formCookieSuffix, Path: s.Cookie.Path, MaxAge: -1,
		HttpOnly: true, SameSite: s.Cookie.SameSite})
}

// formToken is the form cookie's token, or "" when r has none of the
// form FormCSRF sets.
func (s *Sessions) formToken(r *http.Request) string {
	c, err := r.Cookie(s.Cookie.Name + formCookieSuffix)
	if err != nil || len(c.Value) != base64.RawURLEncoding.EncodedLen(formTokenBytes) {
		return ""
	}
	if _, err := base64.RawURLEncoding.DecodeString(c.Value); err != nil {
		return ""
	}
	return c.Value
}

// NewCSRF gives the session a fresh token (at sign-in and sign-out).
func (s *Sessions) NewCSRF(ctx context.Context) {
	s.Put(ctx, keyCSRF, secret.RandomToken("", 32))
}

// CheckCSRF reports whether r may change state: a same-origin request
// carrying the session's token (without a session: its form cookie's).
func (s *Sessions) CheckCSRF(r *http.Request) bool {
	if s.cop.Check(r) != nil {
		return false
	}
	want := s.GetString(r.Context(), keyCSRF)
	if want == "" {
		want = s.formToken(r)
	}
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
