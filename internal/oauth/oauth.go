// Package oauth is the authorization server (OAuth 2.0
// authorization code, RFC 6749, with PKCE, RFC 7636): its clients are the
// partner apps (client_id = app_key, client_secret = the app secret).
//
// It validates authorization requests, issues single-use authorization
// codes (10 minutes), exchanges them for opaque access tokens (7200 s) and
// refresh tokens (rotated on use), and answers userinfo, revocation
// (RFC 7009) and introspection (RFC 7662). Codes and tokens are random
// 256-bit strings of which only the SHA-256 is stored.
//
// The HTTP side (rest/signin/oauth_pages.go) keeps pending requests in a sealed
// cookie until the user signs in, then in the user's session, and maps
// this package's *Error to status codes.
package oauth

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/secret"
)

// Lifetimes.
const (
	// CodeTTL is how long an authorization code can be exchanged.
	CodeTTL = 10 * time.Minute
	// AccessTTL is the lifetime of an access token: 7200 s.
	AccessTTL = 7200 * time.Second
	// RefreshTTL is the lifetime of a refresh token; each use replaces it
	// with a new one.
	RefreshTTL = 30 * 24 * time.Hour
	// PendingTTL bounds the time between /oauth/authorize and the user's
	// decision on the approval page.
	PendingTTL = 10 * time.Minute
)

// Prefixes make the kind of a token recognisable (in leaked-secret scanners).
const (
	codePrefix    = "ghc_"
	accessPrefix  = "gha_"
	refreshPrefix = "ghr_"
	tokenBytes    = 32
)

// Error codes (RFC 6749 sections 4.1.2.1 and 5.2; RFC 6750 section 3.1).
const (
	CodeInvalidRequest          = "invalid_request"
	CodeInvalidClient           = "invalid_client"
	CodeInvalidGrant            = "invalid_grant"
	CodeUnsupportedGrantType    = "unsupported_grant_type"
	CodeUnsupportedResponseType = "unsupported_response_type"
	CodeInvalidScope            = "invalid_scope"
	CodeAccessDenied            = "access_denied"
	CodeInvalidToken            = "invalid_token"
)

// Error is an OAuth error: Code is the "error" value, Description the
// optional "error_description" (never holding a secret).
type Error struct {
	Code        string
	Description string
	// Redirectable: the client and redirect URI are trusted, so an
	// authorization error goes back to the client by redirect (RFC 6749
	// section 4.1.2.1) instead of being shown to the user.
	Redirectable bool
}

func (e *Error) Error() string {
	if e.Description == "" {
		return "oauth: " + e.Code
	}
	return "oauth: " + e.Code + ": " + e.Description
}

func oauthErr(code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...)}
}

// IsCode reports whether err is an *Error with that code.
func IsCode(err error, code string) bool {
	var oe *Error
	return errors.As(err, &oe) && oe.Code == code
}

// Service is the authorization server. It is safe for concurrent use.
type Service struct {
	client *ent.Client
	sealer *secret.Sealer
	// pendingSealer seals pending authorization requests into cookies.
	pendingSealer *secret.Sealer
	clock         atomic.Pointer[func() time.Time]
	// scopes caches scopes_supported of the metadata.
	scopes scopeCache
}

func (s *Service) now() time.Time { return (*s.clock.Load())() }

// Now is the service's clock; the browser flow times pending requests by it.
func (s *Service) Now() time.Time { return s.now() }

// SetClock replaces the clock of a running service (tests move it past
// code and token expiries while requests are served).
func (s *Service) SetClock(now func() time.Time) { s.clock.Store(&now) }

// Option configures a Service.
type Option func(*Service)

// WithClock replaces the clock (tests move it past expiries).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.SetClock(now) } }

// NewService returns the authorization server over client; masterKey (32
// bytes) opens the sealed app secrets.
func NewService(client *ent.Client, masterKey []byte, opts ...Option) (*Service, error) {
	sealer, err := secret.NewSealer(masterKey)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	ps, err := pendingSealer(masterKey)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	s := &Service{client: client, sealer: sealer, pendingSealer: ps}
	s.SetClock(time.Now)
	for _, o := range opts {
		o(s)
	}
	return s, nil
}
