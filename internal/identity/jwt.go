package identity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gatehouse/ent"
	"gatehouse/internal/kv"
	"gatehouse/internal/secret"
)

// MinSigningKeyLen is the shortest HS256 key accepted (256 bits).
const MinSigningKeyLen = 32

// maxTokenLen bounds the work spent on a presented token.
const maxTokenLen = 4096

// denyPrefix starts the deny-list keys in the shared store.
const denyPrefix = "jwt:deny:"

// revokedPrefix starts the per-user revocation marks: the value is the
// unix millisecond at or before which the user's tokens were issued in vain.
const revokedPrefix = "jwt:user-revoked:"

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
			ID:        newJTI(now),
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
// token that must be refused, and an error wrapping errs.Unavailable when
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
	mark, revoked, err := s.store.Get(ctx, revokedPrefix+c.Subject)
	if err != nil {
		return nil, fmt.Errorf("identity: read revocations: %w", err)
	}
	if revoked && issuedAtMillis(c) <= parseMillis(mark) {
		return nil, fmt.Errorf("%w: revoked", ErrInvalidToken)
	}
	return c, nil
}

// RevokeUser refuses, on every replica sharing the store, every token of
// user id issued up to now (Users.Disable, Users.SetPassword). The mark
// outlives them: a token lives at most TTL.
func (s *TokenService) RevokeUser(ctx context.Context, id int) error {
	now := s.now()
	mark := strconv.AppendInt(nil, now.UnixMilli(), 10)
	if err := s.store.Set(ctx, revokedPrefix+strconv.Itoa(id), mark, s.ttl+time.Second); err != nil {
		return fmt.Errorf("identity: write the revocation of user %d: %w", id, err)
	}
	return nil
}

// newJTI returns a token id that also says when, to the millisecond, the
// token was issued ("<unix ms, base 36>.<random>"): iat has whole seconds
// only, and a user disabled and enabled again within one second must not
// lose the token they sign in with right after.
func newJTI(now time.Time) string {
	return strconv.FormatInt(now.UnixMilli(), 36) + "." + secret.RandomToken("", 16)
}

// issuedAtMillis is when c was issued, in unix milliseconds: from its jti
// when it carries one (newJTI), else the start of its iat second (a
// token from an earlier release: refused whenever it might be older than
// a revocation).
func issuedAtMillis(c *Claims) int64 {
	if ms, _, ok := strings.Cut(c.ID, "."); ok {
		if v, err := strconv.ParseInt(ms, 36, 64); err == nil {
			return v
		}
	}
	return c.IssuedAt.Unix() * 1000
}

func parseMillis(b []byte) int64 {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return math.MaxInt64 // unreadable mark: refuse rather than accept
	}
	return v
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
