// Package partner is the partner application domain: apps and their
// secrets (sealed at rest, rotated with a 24 h overlap), the signed-request
// rules of the partner API (canonical string, MD5 / HMAC-SHA256, the check
// order), a short-lived cache of app credentials so that a
// signed request costs no database round trip, and per-day usage counting.
//
// The REST layer (rest/partnerapi/partner.go) calls [Gate.Check] and maps its errors
// to envelope codes; the GraphQL admin calls [Service] to manage apps.
package partner

import (
	"encoding/base64"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/errs"
	"gatehouse/internal/secret"
)

// Errors of the app service, for errors.Is. Bad input is an
// errs.Validation error naming the field (GraphQL spelling).
var (
	// ErrNotFound: no app with that id (or key).
	ErrNotFound = errs.New(errs.NotFound, "partner app not found")
	// ErrConflict: the app_key is taken.
	ErrConflict = errs.New(errs.Conflict, "partner app key already exists")
)

// Status of an app: only enabled apps may call the API.
type Status int

// The app statuses (stored as 0/1, the values partners know).
const (
	Disabled Status = 0
	Enabled  Status = 1
)

// Defaults and limits of an app.
const (
	DefaultRateLimit = 1000
	MaxRateLimit     = 1_000_000
	// RotationOverlap is how long a replaced secret keeps verifying.
	RotationOverlap = 24 * time.Hour
)

// App is the service's view of a partner app. Secrets are never part of it.
type App struct {
	ID        int
	AppName   string
	AppKey    string
	Status    Status
	RateLimit int
	// ExpireDate is a UTC date (midnight); the app may call the API through
	// the end of that day. Nil: no end.
	ExpireDate   *time.Time
	CallbackURL  string
	RedirectURIs []string
	Scopes       []string
	// PreviousSecretExpiresAt is set while a rotated-out app secret still
	// verifies; likewise for the webhook secret.
	PreviousSecretExpiresAt        *time.Time
	PreviousWebhookSecretExpiresAt *time.Time
	CreateTime                     time.Time
	UpdateTime                     time.Time
}

// Enabled reports whether the app is enabled.
func (a *App) Enabled() bool { return a.Status == Enabled }

// ExpiredAt reports whether the app's authorization has ended at now: it
// is valid through the end of its expire date (UTC).
func (a *App) ExpiredAt(now time.Time) bool {
	return a.ExpireDate != nil && !now.Before(a.ExpireDate.AddDate(0, 0, 1))
}

func fromEnt(r *ent.PartnerApp) App {
	return App{
		ID:                             r.ID,
		AppName:                        r.AppName,
		AppKey:                         r.AppKey,
		Status:                         Status(r.Status),
		RateLimit:                      r.RateLimit,
		ExpireDate:                     utcPtr(r.ExpireDate),
		CallbackURL:                    r.CallbackURL,
		RedirectURIs:                   r.RedirectUris,
		Scopes:                         r.Scopes,
		PreviousSecretExpiresAt:        utcPtr(r.PreviousSecretExpiresAt),
		PreviousWebhookSecretExpiresAt: utcPtr(r.PreviousWebhookSecretExpiresAt),
		CreateTime:                     r.CreateTime.UTC(),
		UpdateTime:                     r.UpdateTime.UTC(),
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Service manages partner apps. It is safe for concurrent use.
type Service struct {
	client        *ent.Client
	sealer        *secret.Sealer
	now           func() time.Time
	webhookSecret func() string
	checkCallback func(appKey, url string) error
	cache         *appCache
}

// Option configures a Service.
type Option func(*Service)

// WithClock replaces the clock used for rotation deadlines (tests move it).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithWebhookSecretGen sets how webhook secrets are made (the webhook
// package's NewSecret in production). The default makes the same format:
// "whsec_" + base64 of 32 random bytes.
func WithWebhookSecretGen(gen func() string) Option {
	return func(s *Service) { s.webhookSecret = gen }
}

// WithCallbackURLCheck sets the check a callback URL must pass when it is
// registered (the webhook package's SSRF rules in production). The default
// requires an absolute http(s) URL.
func WithCallbackURLCheck(check func(appKey, url string) error) Option {
	return func(s *Service) { s.checkCallback = check }
}

// NewService returns an app service over client, sealing secrets with
// masterKey (32 bytes).
func NewService(client *ent.Client, masterKey []byte, opts ...Option) (*Service, error) {
	sealer, err := secret.NewSealer(masterKey)
	if err != nil {
		return nil, fmt.Errorf("partner: %w", err)
	}
	s := &Service{
		client:        client,
		sealer:        sealer,
		now:           time.Now,
		webhookSecret: defaultWebhookSecret,
		checkCallback: func(_, u string) error { return checkHTTPURL(u) },
	}
	s.cache = newAppCache(s.loadCredentials)
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

func defaultWebhookSecret() string {
	return "whsec_" + base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
}
