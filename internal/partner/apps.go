package partner

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/internal/errs"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	hooks "gatehouse/internal/webhook"
)

// Limits of the app fields (createPartnerApp, docs/admin-graphql.md).
const (
	MaxAppNameLen   = 128
	MaxAppKeyLen    = 64
	MaxURLLen       = 2048
	MaxRedirectURIs = 20
	MaxScopes       = 50
	MaxScopeLen     = 64
	MinImportSecret = 16
	MaxAppSecretLen = 128
)

// CreateInput creates an app. AppName is required; the rest is optional.
type CreateInput struct {
	AppName string
	// AppKey: 1–64 of [A-Za-z0-9_-]; generated when empty.
	AppKey string
	// RateLimit: requests per second, 1–1 000 000; nil: 1000.
	RateLimit *int
	// ExpireDate: the last day (its date, in its own location) the app may
	// call the API; nil: no end.
	ExpireDate   *time.Time
	CallbackURL  string
	RedirectURIs []string
	Scopes       []string
	// AppSecret imports an existing secret (16–128 printable ASCII
	// characters, e.g. when partners move from another platform) instead of
	// generating one. Empty: generated. Not exposed through GraphQL.
	AppSecret string
	// WebhookSecret imports a webhook signing secret ("whsec_…") instead
	// of generating one: the demo app's, derived from the master key so
	// that the demo banner can print it. Empty: generated. Not exposed
	// through GraphQL.
	WebhookSecret string
}

// UpdateInput changes an app; nil fields are left as they are.
type UpdateInput struct {
	AppName   *string
	Status    *Status
	RateLimit *int
	// ExpireDate sets the expire date; ClearExpireDate removes it.
	ExpireDate      *time.Time
	ClearExpireDate bool
	// CallbackURL: "" removes the callback.
	CallbackURL  *string
	RedirectURIs *[]string
	Scopes       *[]string
}

// Secrets are plaintext secrets, returned only when they are created or
// rotated; empty fields were not changed.
type Secrets struct {
	AppSecret     string
	WebhookSecret string
}

// NewAppSecret returns a fresh app secret: 32 random bytes, URL-safe base64.
func NewAppSecret() string { return secret.RandomToken("", 32) }

func newAppKey() string { return secret.RandomToken("ak_", 12) }

// Create stores a new enabled app with a fresh app secret and webhook
// secret, and returns both in plain text: the only time they are shown.
func (s *Service) Create(ctx context.Context, in CreateInput) (App, Secrets, error) {
	name, err := normalizeAppName(in.AppName)
	if err != nil {
		return App{}, Secrets{}, err
	}
	key := in.AppKey
	if key == "" {
		key = newAppKey()
	} else if err := ValidateAppKey(key); err != nil {
		return App{}, Secrets{}, err
	}
	rate := DefaultRateLimit
	if in.RateLimit != nil {
		if rate, err = validateRateLimit(*in.RateLimit); err != nil {
			return App{}, Secrets{}, err
		}
	}
	if in.CallbackURL != "" {
		if err := s.validateCallback(key, in.CallbackURL); err != nil {
			return App{}, Secrets{}, err
		}
	}
	redirects, err := normalizeRedirectURIs(in.RedirectURIs)
	if err != nil {
		return App{}, Secrets{}, err
	}
	scopes, err := normalizeScopes(in.Scopes)
	if err != nil {
		return App{}, Secrets{}, err
	}
	sec := Secrets{AppSecret: in.AppSecret, WebhookSecret: in.WebhookSecret}
	if sec.WebhookSecret == "" {
		sec.WebhookSecret = s.webhookSecret()
	} else if !strings.HasPrefix(sec.WebhookSecret, "whsec_") || len(sec.WebhookSecret) > MaxAppSecretLen {
		return App{}, Secrets{}, errs.Invalid("webhookSecret", "must be a whsec_ secret of at most %d characters", MaxAppSecretLen)
	}
	if sec.AppSecret == "" {
		sec.AppSecret = NewAppSecret()
	} else if err := validateImportedSecret(sec.AppSecret); err != nil {
		return App{}, Secrets{}, err
	}
	sealedApp, err := s.sealer.Seal([]byte(sec.AppSecret))
	if err != nil {
		return App{}, Secrets{}, fmt.Errorf("seal app secret: %w", err)
	}
	sealedHook, err := s.sealer.Seal([]byte(sec.WebhookSecret))
	if err != nil {
		return App{}, Secrets{}, fmt.Errorf("seal webhook secret: %w", err)
	}
	now := s.now()
	var row *ent.PartnerApp
	err = store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		var err error
		row, err = tx.PartnerApp.Create().
			SetAppName(name).
			SetAppKey(key).
			SetSecret(sealedApp).
			SetWebhookSecret(sealedHook).
			SetStatus(int(Enabled)).
			SetRateLimit(rate).
			SetNillableExpireDate(dateOf(in.ExpireDate)).
			SetCallbackURL(in.CallbackURL).
			SetRedirectUris(redirects).
			SetScopes(scopes).
			SetCreateTime(now).
			SetUpdateTime(now).
			Save(ctx)
		if err != nil {
			return err
		}
		// The callback URL becomes the app's first webhook endpoint.
		return hooks.SyncFirstEndpoint(ctx, tx.Client(), row.ID)
	})
	if ent.IsConstraintError(err) {
		return App{}, Secrets{}, fmt.Errorf("%w: %q", ErrConflict, key)
	}
	if err != nil {
		return App{}, Secrets{}, fmt.Errorf("create partner app: %w", err)
	}
	// A key that was unknown may sit in the cache as "no such app".
	s.cache.forget(key)
	return fromEnt(row), sec, nil
}

// Update changes the given fields of app id. Changes reach every replica's
// signed-request checks within [DefaultCacheTTL].
func (s *Service) Update(ctx context.Context, id int, in UpdateInput) (App, error) {
	return s.update(ctx, id, in)
}

func (s *Service) update(ctx context.Context, id int, in UpdateInput) (App, error) {
	var row *ent.PartnerApp
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		u, err := s.updateOf(ctx, tx.PartnerApp.UpdateOneID(id).SetUpdateTime(s.now()), id, in)
		if err != nil {
			return err
		}
		if row, err = u.Save(ctx); err != nil {
			return err
		}
		if in.CallbackURL != nil {
			// The first webhook endpoint follows the callback URL.
			return hooks.SyncFirstEndpoint(ctx, tx.Client(), id)
		}
		return nil
	})
	if ent.IsNotFound(err) {
		return App{}, ErrNotFound
	}
	var ve *errs.Error
	if errors.As(err, &ve) {
		return App{}, err
	}
	if err != nil {
		return App{}, fmt.Errorf("update partner app %d: %w", id, err)
	}
	s.cache.forget(row.AppKey)
	return fromEnt(row), nil
}

// updateOf adds in's changes to u (the update of app id).
func (s *Service) updateOf(ctx context.Context, u *ent.PartnerAppUpdateOne, id int, in UpdateInput) (*ent.PartnerAppUpdateOne, error) {
	if in.AppName != nil {
		name, err := normalizeAppName(*in.AppName)
		if err != nil {
			return nil, err
		}
		u.SetAppName(name)
	}
	if in.Status != nil {
		if *in.Status != Enabled && *in.Status != Disabled {
			return nil, errs.Invalid("status", "must be 0 (disabled) or 1 (enabled)")
		}
		u.SetStatus(int(*in.Status))
	}
	if in.RateLimit != nil {
		rate, err := validateRateLimit(*in.RateLimit)
		if err != nil {
			return nil, err
		}
		u.SetRateLimit(rate)
	}
	switch {
	case in.ClearExpireDate && in.ExpireDate != nil:
		return nil, errs.Invalid("expireDate", "cannot be set and cleared at once")
	case in.ClearExpireDate:
		u.ClearExpireDate()
	case in.ExpireDate != nil:
		u.SetExpireDate(*dateOf(in.ExpireDate))
	}
	if in.CallbackURL != nil {
		if *in.CallbackURL != "" {
			// The check may depend on the app (the demo app may call back
			// to loopback).
			key, err := s.client.PartnerApp.Query().Where(partnerapp.ID(id)).Select(partnerapp.FieldAppKey).String(ctx)
			if ent.IsNotFound(err) {
				return nil, ErrNotFound
			}
			if err != nil {
				return nil, fmt.Errorf("update app %d: %w", id, err)
			}
			if err := s.validateCallback(key, *in.CallbackURL); err != nil {
				return nil, err
			}
		}
		u.SetCallbackURL(*in.CallbackURL)
	}
	if in.RedirectURIs != nil {
		r, err := normalizeRedirectURIs(*in.RedirectURIs)
		if err != nil {
			return nil, err
		}
		u.SetRedirectUris(r)
	}
	if in.Scopes != nil {
		sc, err := normalizeScopes(*in.Scopes)
		if err != nil {
			return nil, err
		}
		u.SetScopes(sc)
	}
	return u, nil
}

// RotateSecret gives app id a new app secret and returns it. The replaced
// secret keeps verifying for [RotationOverlap]; a secret replaced before
// that (a second rotation within 24 h) stops at once: one previous secret
// is kept.
func (s *Service) RotateSecret(ctx context.Context, id int) (App, string, error) {
	plain := NewAppSecret()
	row, err := s.rotate(ctx, id, plain, false)
	if err != nil {
		return App{}, "", err
	}
	return fromEnt(row), plain, nil
}

// RotateWebhookSecret gives app id a new webhook signing secret and
// returns it; the replaced one keeps signing for [RotationOverlap].
func (s *Service) RotateWebhookSecret(ctx context.Context, id int) (App, string, error) {
	plain := s.webhookSecret()
	row, err := s.rotate(ctx, id, plain, true)
	if err != nil {
		return App{}, "", err
	}
	return fromEnt(row), plain, nil
}

// rotate swaps in a new sealed secret with a compare-and-set on the old
// one, so two concurrent rotations both end up valid in order (the second
// one's previous secret is the first one's new secret) instead of one
// silently losing.
func (s *Service) rotate(ctx context.Context, id int, plain string, webhook bool) (*ent.PartnerApp, error) {
	sealed, err := s.sealer.Seal([]byte(plain))
	if err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	// Each round has one winner; enough rounds for a handful of admins
	// rotating the same app at once (the request deadline bounds it too).
	for range 12 {
		cur, err := s.client.PartnerApp.Get(ctx, id)
		if ent.IsNotFound(err) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("rotate secret of app %d: %w", id, err)
		}
		now := s.now()
		var n int
		err = store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
			u := tx.PartnerApp.Update().Where(partnerapp.ID(id)).SetUpdateTime(now)
			if webhook {
				if cur.WebhookSecret == nil {
					u.Where(partnerapp.WebhookSecretIsNil()).ClearPreviousWebhookSecret().ClearPreviousWebhookSecretExpiresAt()
				} else {
					u.Where(partnerapp.WebhookSecretEQ(*cur.WebhookSecret)).
						SetPreviousWebhookSecret(*cur.WebhookSecret).
						SetPreviousWebhookSecretExpiresAt(now.Add(RotationOverlap))
				}
				u.SetWebhookSecret(sealed)
			} else {
				u.Where(partnerapp.SecretEQ(cur.Secret)).
					SetSecret(sealed).
					SetPreviousSecret(cur.Secret).
					SetPreviousSecretExpiresAt(now.Add(RotationOverlap))
			}
			var err error
			if n, err = u.Save(ctx); err != nil || n != 1 || !webhook {
				return err
			}
			// The app's webhook secret is its first endpoint's.
			return hooks.SyncFirstEndpointSecret(ctx, tx.Client(), id)
		})
		if err != nil {
			return nil, fmt.Errorf("rotate secret of app %d: %w", id, err)
		}
		if n == 1 {
			s.cache.forget(cur.AppKey)
			row, err := s.client.PartnerApp.Get(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("rotate secret of app %d: %w", id, err)
			}
			return row, nil
		}
		// Another rotation won the race; rotate on top of it.
	}
	return nil, fmt.Errorf("rotate secret of app %d: too many concurrent rotations", id)
}

// Get returns app id.
func (s *Service) Get(ctx context.Context, id int) (App, error) {
	row, err := s.client.PartnerApp.Get(ctx, id)
	if ent.IsNotFound(err) {
		return App{}, ErrNotFound
	}
	if err != nil {
		return App{}, fmt.Errorf("get partner app %d: %w", id, err)
	}
	return fromEnt(row), nil
}

// GetByKey returns the app with that app_key.
func (s *Service) GetByKey(ctx context.Context, appKey string) (App, error) {
	row, err := s.client.PartnerApp.Query().Where(partnerapp.AppKey(appKey)).Only(ctx)
	if ent.IsNotFound(err) {
		return App{}, ErrNotFound
	}
	if err != nil {
		return App{}, fmt.Errorf("get partner app %q: %w", appKey, err)
	}
	return fromEnt(row), nil
}

// SecretMatches reports, in constant time, whether candidate is the
// current app secret of appKey, without ever revealing the secret (the
// demo uses it to tell whether its documented secret is still in force).
func (s *Service) SecretMatches(ctx context.Context, appKey, candidate string) (bool, error) {
	row, err := s.client.PartnerApp.Query().Where(partnerapp.AppKey(appKey)).Only(ctx)
	if ent.IsNotFound(err) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("partner app %q: %w", appKey, err)
	}
	p, err := s.sealer.Open(row.Secret)
	if err != nil {
		return false, fmt.Errorf("app secret of %q: %w", appKey, err)
	}
	return secret.Equal(string(p), candidate), nil
}

// CurrentSecret unseals the current app secret of appKey. Only the demo's
// start-up banner uses it (the operator's own process printing its own demo
// credentials, so that after a rotation it prints the live secret, never a
// dead one); no front door reveals a secret after it was issued.
func (s *Service) CurrentSecret(ctx context.Context, appKey string) (string, error) {
	row, err := s.client.PartnerApp.Query().Where(partnerapp.AppKey(appKey)).Only(ctx)
	if ent.IsNotFound(err) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("partner app %q: %w", appKey, err)
	}
	p, err := s.sealer.Open(row.Secret)
	if err != nil {
		return "", fmt.Errorf("app secret of %q: %w", appKey, err)
	}
	return string(p), nil
}

// CurrentWebhookSecret returns the webhook signing secret in force of the
// app with appKey, "" when it has none (the demo's banner prints the one
// in force, also after a rotation).
func (s *Service) CurrentWebhookSecret(ctx context.Context, appKey string) (string, error) {
	row, err := s.client.PartnerApp.Query().Where(partnerapp.AppKey(appKey)).Only(ctx)
	if ent.IsNotFound(err) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("partner app %q: %w", appKey, err)
	}
	if row.WebhookSecret == nil {
		return "", nil
	}
	p, err := s.sealer.Open(*row.WebhookSecret)
	if err != nil {
		return "", fmt.Errorf("webhook secret of %q: %w", appKey, err)
	}
	return string(p), nil
}

// WebhookSecretMatches reports whether candidate is the current webhook
// secret of the app with appKey (the demo tells whether its derived secret
// is still the one in use).
func (s *Service) WebhookSecretMatches(ctx context.Context, appKey, candidate string) (bool, error) {
	row, err := s.client.PartnerApp.Query().Where(partnerapp.AppKey(appKey)).Only(ctx)
	if ent.IsNotFound(err) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("partner app %q: %w", appKey, err)
	}
	if row.WebhookSecret == nil {
		return false, nil
	}
	p, err := s.sealer.Open(*row.WebhookSecret)
	if err != nil {
		return false, nil // sealed with another master key: not this one
	}
	return secret.Equal(string(p), candidate), nil
}

// ValidateAppKey checks the app_key rule: 1–64 of [A-Za-z0-9_-].
func ValidateAppKey(key string) error {
	if key == "" || len(key) > MaxAppKeyLen {
		return errs.Invalid("appKey", "must be 1 to %d characters", MaxAppKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errs.Invalid("appKey", "may only hold letters, digits, '_' and '-'")
		}
	}
	return nil
}

func normalizeAppName(name string) (string, error) {
	n, err := errs.Text("appName", name, MaxAppNameLen)
	if err == nil && n == "" {
		return "", errs.Invalid("appName", "is required")
	}
	return n, err
}

func validateRateLimit(v int) (int, error) {
	if v < 1 || v > MaxRateLimit {
		return 0, errs.Invalid("rateLimit", "must be between 1 and %d requests per second", MaxRateLimit)
	}
	return v, nil
}

func validateImportedSecret(v string) error {
	if len(v) < MinImportSecret || len(v) > MaxAppSecretLen {
		return errs.Invalid("appSecret", "must be %d to %d characters", MinImportSecret, MaxAppSecretLen)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return errs.Invalid("appSecret", "must be printable ASCII without spaces")
		}
	}
	return nil
}

func (s *Service) validateCallback(appKey, u string) error {
	if len(u) > MaxURLLen {
		return errs.Invalid("callbackURL", "must be at most %d characters", MaxURLLen)
	}
	if err := s.checkCallback(appKey, u); err != nil {
		return errs.Invalid("callbackURL", "%v", err)
	}
	return nil
}

func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL")
	}
	return nil
}

// normalizeRedirectURIs checks OAuth redirect URIs: absolute, no fragment
// (RFC 6749 section 3.1.2), at most 2048 characters; duplicates are dropped.
func normalizeRedirectURIs(in []string) ([]string, error) {
	if len(in) > MaxRedirectURIs {
		return nil, errs.Invalid("redirectURIs", "at most %d", MaxRedirectURIs)
	}
	out := make([]string, 0, len(in))
	for _, raw := range in {
		u, err := url.Parse(raw)
		switch {
		case len(raw) > MaxURLLen:
			return nil, errs.Invalid("redirectURIs", "each must be at most %d characters", MaxURLLen)
		case err != nil || u.Scheme == "" || u.Host == "" && u.Scheme != "urn":
			return nil, errs.Invalid("redirectURIs", "%q is not an absolute URI", raw)
		case u.Fragment != "" || strings.Contains(raw, "#"):
			return nil, errs.Invalid("redirectURIs", "%q must not have a fragment", raw)
		}
		if !slices.Contains(out, raw) {
			out = append(out, raw)
		}
	}
	return out, nil
}

// normalizeScopes checks scope tokens (RFC 6749 section 3.3 characters, at most
// 64 each); duplicates are dropped.
func normalizeScopes(in []string) ([]string, error) {
	if len(in) > MaxScopes {
		return nil, errs.Invalid("scopes", "at most %d", MaxScopes)
	}
	out := make([]string, 0, len(in))
	for _, sc := range in {
		if sc == "" || len(sc) > MaxScopeLen {
			return nil, errs.Invalid("scopes", "each must be 1 to %d characters", MaxScopeLen)
		}
		for i := 0; i < len(sc); i++ {
			c := sc[i]
			if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return nil, errs.Invalid("scopes", "%q holds a character not allowed in a scope", sc)
			}
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// dateOf keeps only the calendar date of t (in t's own location), as UTC
// midnight.
func dateOf(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	y, m, d := t.Date()
	u := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	return &u
}
