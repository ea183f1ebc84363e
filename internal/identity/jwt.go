package identity

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gatehouse/ent"
	"gatehouse/internal/kv"
	"gatehouse/internal/secret"
)

// DefaultTokenTTL is the lifetime of a signed user token: 7 200 000 ms.
const DefaultTokenTTL = 7_200_000 * time.Millisecond

// MinSigningKeyLen is the shortest HS256 key accepted (256 bits).
const MinSigningKeyLen = 32

// maxTokenLen bounds the work spent on a presented token.
const maxTokenLen = 4096

// denyPrefix starts the deny-list keys in the shared store.
const denyPrefix = "jwt:deny:"

// ErrInvalidToken is returned by Verify for a token that is malformed,
// not signed with HS256 by our key, expired, or logged out.
var ErrInvalidToken = errors.New("identity: invalid token")

// Claims are the claims of a signed user token: sub (the user id),
// username, roles, iat, exp and jti.
type Claims struct {
	Username string   `json:"username"`
	Roles    []string `json:"roles"`
	jwt.RegisteredClaims
}

// UserID returns the subject as a user id.
func (c *Claims) UserID() (int, error) { return strconv.Atoi(c.Subject) }

// TokenService issues and verifies signed user tokens (HS256 only) and
// keeps the deny-list of logged-out tokens in the shared store, so that a
// logout reaches every replica sharing Redis.
type TokenService struct {
	key    []byte
	ttl    time.Duration
	store  kv.Store
	now    func() time.Time
	parser *jwt.Parser
}

// TokenOption configures a TokenService.
type TokenOption func(*TokenService)

// WithTokenClock replaces the clock (tests move it past expiry).
func WithTokenClock(now func() time.Time) TokenOption {
	return func(s *TokenService) { s.now = now }
}

// NewTokenService returns a service signing with key (at least 32 bytes)
// tokens valid for ttl (at least one second: exp has second resolution).
func NewTokenService(key []byte, ttl time.Duration, store kv.Store, opts ...TokenOption) (*TokenService, error) {
	if len(key) < MinSigningKeyLen {
		return nil, fmt.Errorf("identity: JWT signing key is %d bytes, want at least %d", len(key), MinSigningKeyLen)
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("identity: JWT lifetime %v is below one second", ttl)
	}
	s := &TokenService{key: key, ttl: ttl, store: store, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	s.parser = jwt.NewParser(
		// Pinning the algorithm is what defeats "alg":"none" and
		// key-confusion tokens: anything but HS256 fails before the key is used.
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return s.now() }),
	)
	return s, nil
}

// TTL is the lifetime of issued tokens.
func (s *TokenService) TTL() time.Duration { return s.ttl }

// Issue signs a token for u.
func (s *TokenService) Issue(u *ent.User) (string, *Claims, error) {
	now := s.now()
	roles := u.Roles
	if roles == nil {
		roles = []string{}
	}
	c := &Claims{
		Username: u.Username,
		Roles:    roles,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   strconv.Itoa(u.ID),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(s.ttl)),
			ID:        secret.RandomToken("", 16),
		},
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.key)
	if err != nil {
		return "", nil, fmt.Errorf("identity: sign token: %w", err)
	}
	return signed, c, nil
}

// Verify checks a token's algorithm (HS256 only), signature, expiry and
// required claims, then the deny-list. It returns ErrInvalidToken for any
// token that must be refused, and an error wrapping kv.ErrUnavailable when
// the deny-list cannot be read (the token is then not accepted either).
func (s *TokenService) Verify(ctx context.Context, raw string) (*Claims, error) {
	if raw == "" || len(raw) > maxTokenLen {
		return nil, ErrInvalidToken
	}
	c := &Claims{}
	_, err := s.parser.ParseWithClaims(raw, c, func(*jwt.Token) (any, error) { return s.key, nil })
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if c.Subject == "" || c.ID == "" || c.Username == "" || c.IssuedAt == nil {
		return nil, fmt.Errorf("%w: missing claims", ErrInvalidToken)
	}
	if _, err := c.UserID(); err != nil {
		return nil, fmt.Errorf("%w: subject is not a user id", ErrInvalidToken)
	}
	_, denied, err := s.store.Get(ctx, denyPrefix+c.ID)
	if err != nil {
		return nil, fmt.Errorf("identity: read deny-list: %w", err)
	}
	if denied {
		return nil, fmt.Errorf("%w: logged out", ErrInvalidToken)
	}
	return c, nil
}

// Revoke puts the token with claims c on the deny-list until it expires,
// so that every replica sharing the store refuses it from now on.
func (s *TokenService) Revoke(ctx context.Context, c *Claims) error {
	// One second more than the remaining lifetime: exp has second
	// resolution, and the entry must not vanish while the token still verifies.
	ttl := c.ExpiresAt.Sub(s.now()) + time.Second
	if ttl <= 0 {
		return nil
	}
	if err := s.store.Set(ctx, denyPrefix+c.ID, []byte{1}, ttl); err != nil {
		return fmt.Errorf("identity: write deny-list: %w", err)
	}
	return nil
}
