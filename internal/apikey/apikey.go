// Package apikey is the admin API key domain: keys are random
// tokens shown once, stored only as a SHA-256 hash with a short display
// prefix, enabled (1) or disabled (0). Every accepted key use is counted in
// memory and added to the key's usage_count in batches (see [Counter]).
package apikey

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/ent"
	entapikey "gatehouse/ent/apikey"
	"gatehouse/internal/errs"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
)

// Errors of the service, for errors.Is.
var (
	// ErrMissing: no key was presented (401 missing_api_key).
	ErrMissing = errors.New("missing API key")
	// ErrInvalid: the key is unknown or disabled (401 invalid_api_key).
	ErrInvalid = errors.New("invalid API key")
	// ErrNotFound: no key has that id.
	ErrNotFound = errs.New(errs.NotFound, "API key not found")
)

// Status of a key: only enabled keys authenticate.
const (
	Disabled = 0
	Enabled  = 1
)

// Limits and formats.
const (
	// MaxNameLen bounds the key's name, in characters.
	MaxNameLen = 128
	// KeyPrefix starts every generated key, so that leaked keys are easy to
	// recognise (secret scanners, logs).
	KeyPrefix = "ghk_"
	// MinKeyLen is the shortest chosen (bootstrap) key accepted. The
	// setting promises a key with exactly the configured value, so a short
	// one is accepted; the process warns about keys shorter than
	// RecommendedKeyLen instead.
	MinKeyLen = 1
	// RecommendedKeyLen is the length below which a chosen key is weak.
	RecommendedKeyLen = 16
	// MaxKeyLen is the longest key looked up; longer headers are invalid
	// without touching storage.
	MaxKeyLen = 256
	// displayPrefixLen is how many leading characters of a generated key
	// are kept in clear to tell keys apart.
	displayPrefixLen = 8
)

// Service creates, disables and checks API keys. It is safe for concurrent use.
type Service struct {
	client  *ent.Client
	counter *Counter
	mirror  *Mirror
}

// Option configures a Service.
type Option func(*Service)

// WithMirror checks keys against m, this process's mirror of the key
// rows, instead of reading the database on every check; the service's
// changes of keys are announced through it.
func WithMirror(m *Mirror) Option { return func(s *Service) { s.mirror = m } }

// NewService returns a key service over client that counts accepted uses
// with counter (nil: uses are not counted, e.g. in the CLI).
func NewService(client *ent.Client, counter *Counter, opts ...Option) *Service {
	s := &Service{client: client, counter: counter}
	for _, o := range opts {
		o(s)
	}
	return s
}

// NewKey returns a fresh key: "ghk_" and 32 random bytes (URL-safe base64).
func NewKey() string { return secret.RandomToken(KeyPrefix, 32) }

// displayPrefix is the part of key kept in clear: 8 characters of a
// generated key ("ghk_" and 4 random ones), and at most a quarter of any
// other key, so that a short chosen key (the bootstrap key) gives little away.
func displayPrefix(key string) string {
	n := min(displayPrefixLen, len(key)/4)
	return key[:n]
}

// Create stores a new enabled key named name with role and returns it
// with the key in plain text: the only time it is shown.
func (s *Service) Create(ctx context.Context, name string, role Role) (*ent.APIKey, string, error) {
	return s.CreateScoped(ctx, name, role, nil)
}

// CreateScoped is Create for a PUBLISHER key limited to the event types
// scopes allow (NormalizeScopes; empty: every type).
func (s *Service) CreateScoped(ctx context.Context, name string, role Role, scopes []string) (*ent.APIKey, string, error) {
	n, err := normalizeName(name)
	if err != nil {
		return nil, "", err
	}
	if err := entapikey.RoleValidator(role); err != nil {
		return nil, "", errs.Invalid("role", "must be ADMIN, READ_ONLY or PUBLISHER")
	}
	scopes, err = NormalizeScopes(role, scopes)
	if err != nil {
		return nil, "", err
	}
	key := NewKey()
	row, err := s.client.APIKey.Create().
		SetName(n).
		SetPrefix(displayPrefix(key)).
		SetKeyHash(secret.HashToken(key)).
		SetStatus(Enabled).
		SetRole(role).
		SetScopes(scopes).
		SetCreateTime(time.Now()).
		Save(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("create API key: %w", err)
	}
	return row, key, nil
}

// Ensure makes sure an enabled ADMIN key with exactly this value exists: it is
// created (named name) when missing and enabled again when disabled
// (GATEHOUSE_BOOTSTRAP_API_KEY). Replicas starting together may race; the
// loser finds the winner's row.
func (s *Service) Ensure(ctx context.Context, name, key string) (*ent.APIKey, error) {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return nil, errs.Invalid("key", "must be %d to %d characters", MinKeyLen, MaxKeyLen)
	}
	n, err := normalizeName(name)
	if err != nil {
		return nil, err
	}
	hash := secret.HashToken(key)
	for range 2 {
		row, err := s.client.APIKey.Query().Where(entapikey.KeyHash(hash)).Only(ctx)
		switch {
		case err == nil:
			if row.Status == Enabled && row.Role == RoleAdmin {
				return row, nil
			}
			return s.change(ctx, row.ID, func(u *ent.APIKeyUpdateOne) { u.SetStatus(Enabled).SetRole(RoleAdmin) })
		case !ent.IsNotFound(err):
			return nil, fmt.Errorf("look up bootstrap API key: %w", err)
		}
		row, err = s.client.APIKey.Create().
			SetName(n).
			SetPrefix(displayPrefix(key)).
			SetKeyHash(hash).
			SetStatus(Enabled).
			SetRole(RoleAdmin).
			SetCreateTime(time.Now()).
			Save(ctx)
		if err == nil {
			return row, nil
		}
		if !ent.IsConstraintError(err) {
			return nil, fmt.Errorf("create bootstrap API key: %w", err)
		}
		// Another replica created it meanwhile: read it again.
	}
	return nil, errors.New("create bootstrap API key: lost the race twice")
}

// Disable sets key id to disabled; it stops authenticating at once. Disabling
// a disabled key is not an error.
func (s *Service) Disable(ctx context.Context, id int) (*ent.APIKey, error) {
	return s.setStatus(ctx, id, Disabled)
}

// Enable sets key id to enabled again; it authenticates from the next
// request on. Enabling an enabled key is not an error.
func (s *Service) Enable(ctx context.Context, id int) (*ent.APIKey, error) {
	return s.setStatus(ctx, id, Enabled)
}

func (s *Service) setStatus(ctx context.Context, id, status int) (*ent.APIKey, error) {
	return s.change(ctx, id, func(u *ent.APIKeyUpdateOne) { u.SetStatus(status) })
}

// change applies edit to key id and announces it: every change of a key
// goes through here, so that no replica goes on accepting what it no
// longer allows (see Mirror). On Postgres the NOTIFY is sent in the
// change's transaction (delivered at its commit); the change mark is
// written after the commit, before the call returns.
func (s *Service) change(ctx context.Context, id int, edit func(*ent.APIKeyUpdateOne)) (*ent.APIKey, error) {
	var row *ent.APIKey
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		u := tx.APIKey.UpdateOneID(id)
		edit(u)
		var err error
		if row, err = u.Save(ctx); err != nil {
			return err
		}
		if s.mirror == nil {
			return nil
		}
		return store.Notify(ctx, tx, s.mirror.db.Dialect, ChangeChannel)
	})
	if ent.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("change API key %d: %w", id, err)
	}
	if s.mirror != nil {
		s.mirror.changed(ctx)
	}
	return row, nil
}

// Authenticate checks a presented key: ErrMissing when it is empty,
// ErrInvalid when it is unknown or disabled. An accepted key's use is
// counted. Without a mirror the key is looked up by its hash on every
// call (one indexed read); with one (WithMirror), only when no row of it
// was read since the last change of any key. Either way a disabled key
// is refused by every replica from the next request on.
func (s *Service) Authenticate(ctx context.Context, key string) (*ent.APIKey, error) {
	if key == "" {
		return nil, ErrMissing
	}
	if len(key) > MaxKeyLen {
		return nil, ErrInvalid
	}
	hash := secret.HashToken(key)
	var row *ent.APIKey
	var err error
	if s.mirror != nil {
		row, err = s.mirror.lookup(ctx, hash)
	} else {
		row, err = readKey(ctx, s.client, hash)
	}
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, ErrInvalid
	}
	// The lookup compared hashes in the database; compare again in
	// constant time so that no code path depends on an early-exit compare.
	if !secret.Equal(row.KeyHash, hash) || row.Status != Enabled {
		return nil, ErrInvalid
	}
	if s.counter != nil {
		s.counter.Add(row.ID, time.Now())
	}
	return row, nil
}

func normalizeName(name string) (string, error) {
	n, err := errs.Text("name", name, MaxNameLen)
	if err == nil && n == "" {
		return "", errs.Invalid("name", "is required")
	}
	return n, err
}
