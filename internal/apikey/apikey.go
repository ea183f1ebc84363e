// Package apikey is the admin API key domain (scheme 4): keys are random
// tokens shown once, stored only as a SHA-256 hash with a short display
// prefix, enabled (1) or disabled (0). Every accepted key use is counted in
// memory and added to the key's usage_count in batches (see [Counter]).
package apikey

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gatehouse/ent"
	entapikey "gatehouse/ent/apikey"
	"gatehouse/internal/secret"
)

// Errors of the service, for errors.Is.
var (
	// ErrMissing: no key was presented (401 missing_api_key).
	ErrMissing = errors.New("missing API key")
	// ErrInvalid: the key is unknown or disabled (401 invalid_api_key).
	ErrInvalid = errors.New("invalid API key")
	// ErrNotFound: no key has that id.
	ErrNotFound = errors.New("API key not found")
)

// ValidationError is an input that breaks a rule, with a message fit for
// the caller. Field names the input field (GraphQL spelling).
type ValidationError struct {
	Field string
	Msg   string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Msg }

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
	// contract promises a key with exactly the configured value, so a short
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
	now     func() time.Time
}

// Option configures a Service.
type Option func(*Service)

// WithClock replaces the clock (tests).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// NewService returns a key service over client that counts accepted uses
// with counter (nil: uses are not counted, e.g. in the CLI).
func NewService(client *ent.Client, counter *Counter, opts ...Option) *Service {
	s := &Service{client: client, counter: counter, now: time.Now}
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

// Create stores a new enabled key named name and returns it with the key
// in plain text: the only time it is shown.
func (s *Service) Create(ctx context.Context, name string) (*ent.APIKey, string, error) {
	n, err := normalizeName(name)
	if err != nil {
		return nil, "", err
	}
	key := NewKey()
	row, err := s.client.APIKey.Create().
		SetName(n).
		SetPrefix(displayPrefix(key)).
		SetKeyHash(secret.HashToken(key)).
		SetStatus(Enabled).
		SetCreateTime(s.now()).
		Save(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("create API key: %w", err)
	}
	return row, key, nil
}

// Ensure makes sure an enabled key with exactly this value exists: it is
// created (named name) when missing and enabled again when disabled
// (GATEHOUSE_BOOTSTRAP_API_KEY). Replicas starting together may race; the
// loser finds the winner's row.
func (s *Service) Ensure(ctx context.Context, name, key string) (*ent.APIKey, error) {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return nil, &ValidationError{Field: "key", Msg: fmt.Sprintf("must be %d to %d characters", MinKeyLen, MaxKeyLen)}
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
			if row.Status == Enabled {
				return row, nil
			}
			return s.client.APIKey.UpdateOne(row).SetStatus(Enabled).Save(ctx)
		case !ent.IsNotFound(err):
			return nil, fmt.Errorf("look up bootstrap API key: %w", err)
		}
		row, err = s.client.APIKey.Create().
			SetName(n).
			SetPrefix(displayPrefix(key)).
			SetKeyHash(hash).
			SetStatus(Enabled).
			SetCreateTime(s.now()).
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
	row, err := s.client.APIKey.UpdateOneID(id).SetStatus(Disabled).Save(ctx)
	if ent.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("disable API key %d: %w", id, err)
	}
	return row, nil
}

// Authenticate checks a presented key: ErrMissing when it is empty,
// ErrInvalid when it is unknown or disabled. An accepted key's use is
// counted. The key is looked up by its hash on every call (one indexed
// read), so a disabled key is refused by every replica from the next
// request on.
func (s *Service) Authenticate(ctx context.Context, key string) (*ent.APIKey, error) {
	if key == "" {
		return nil, ErrMissing
	}
	if len(key) > MaxKeyLen {
		return nil, ErrInvalid
	}
	hash := secret.HashToken(key)
	row, err := s.client.APIKey.Query().Where(entapikey.KeyHash(hash)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, ErrInvalid
	}
	if err != nil {
		return nil, fmt.Errorf("look up API key: %w", err)
	}
	// The lookup compared hashes in the database; compare again in
	// constant time so that no code path depends on an early-exit compare.
	if !secret.Equal(row.KeyHash, hash) || row.Status != Enabled {
		return nil, ErrInvalid
	}
	if s.counter != nil {
		s.counter.Add(row.ID, s.now())
	}
	return row, nil
}

func normalizeName(name string) (string, error) {
	n := strings.TrimSpace(name)
	switch {
	case n == "":
		return "", &ValidationError{Field: "name", Msg: "is required"}
	case !utf8.ValidString(n):
		return "", &ValidationError{Field: "name", Msg: "must be valid UTF-8"}
	case utf8.RuneCountInString(n) > MaxNameLen:
		return "", &ValidationError{Field: "name", Msg: fmt.Sprintf("must be at most %d characters", MaxNameLen)}
	case strings.ContainsFunc(n, unicode.IsControl):
		return "", &ValidationError{Field: "name", Msg: "must not contain control characters"}
	}
	return n, nil
}
