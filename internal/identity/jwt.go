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
	"gatehouse/internal/errs"
	"gatehouse/internal/kv"
	"gatehouse/internal/secret"
)

// MinSigningKeyLen is the shortest HS256 key accepted (256 bits).
const MinSigningKeyLen = 32

// maxTokenLen bounds the work spent on a presented token.
const maxTokenLen = 4096

// denyPrefix starts the deny-list keys in the shared store.
const denyPrefix = "jwt:deny:"

// revokedPrefix starts the per-user revocation marks: the value is
// "<unix ms>:<security version>" — tokens of the user issued at or before
// that millisecond, or carrying a lower security version, are refused
// (see formatMark).
const revokedPrefix = "jwt:user-revoked:"

// MaxSignInAge bounds the time between a login's read of the user and the
// token it issues (a login slower than that is refused, 503, and may be
// repeated). A user revocation is kept this much longer than a token
// lives: a token carrying the version before the change is issued at most
// MaxSignInAge after the change, so it expires before its revocation is
// forgotten (pruned from the database, expired in Redis).
const MaxSignInAge = time.Minute

// ErrInvalidToken is returned by Verify for a token that is malformed,
// not signed with HS256 by our key, expired, or logged out.
var ErrInvalidToken = errors.New("identity: invalid token")

// Claims are the claims of a signed user token: sub (the user id),
// username, roles, iat, exp, jti and sv.
type Claims struct {
	Username string   `json:"username"`
	Roles    []string `json:"roles"`
	// SecurityVersion (sv) is the user's security version when the login
	// read them, before the password check (see SignIn). Tokens of
	// earlier releases have none; only the revocation instant applies
	// to them.
	SecurityVersion *int `json:"sv,omitempty"`
	jwt.RegisteredClaims
}

// UserID returns the subject as a user id.
func (c *Claims) UserID() (int, error) { return strconv.Atoi(c.Subject) }

// TokenService issues and verifies signed user tokens (HS256 only) and
// keeps the deny-list of logged-out tokens in the shared store, so that a
// logout reaches every replica sharing Redis.
type TokenService struct {
	key   []byte
	ttl   time.Duration
	store kv.Store
	// revs is the durable record of revocations and its in-memory
	// mirror; nil in tools and tests without a database (the shared
	// store alone then keeps them).
	revs   *Revocations
	now    func() time.Time
	parser *jwt.Parser
}

// TokenOption configures a TokenService.
type TokenOption func(*TokenService)

// WithTokenClock replaces the clock (tests move it past expiry).
func WithTokenClock(now func() time.Time) TokenOption {
	return func(s *TokenService) { s.now = now }
}

// WithRevocations makes the database the record of logouts and user
// revocations (see Revocations); the shared store stays a cache of them.
func WithRevocations(r *Revocations) TokenOption {
	return func(s *TokenService) { s.revs = r }
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

// IssueSignIn signs a token for a login's user, carrying the security
// version the login read. A sign-in read more than MaxSignInAge ago is
// refused (errs.Unavailable: the login may be repeated), so that no token
// outlives the revocations that may concern it.
func (s *TokenService) IssueSignIn(si *SignIn) (string, *Claims, error) {
	now := s.now()
	if age := now.Sub(si.ReadAt); age > MaxSignInAge {
		return "", nil, fmt.Errorf("%w: the sign-in took %v, longer than %v; sign in again", errs.Unavailable, age.Round(time.Millisecond), MaxSignInAge)
	}
	return s.sign(si.User, now)
}

// Issue signs a token for u, a user read just now (tools and tests; a
// login calls IssueSignIn).
func (s *TokenService) Issue(u *ent.User) (string, *Claims, error) {
	return s.sign(u, s.now())
}

// sign signs a token for u, issued at now.
func (s *TokenService) sign(u *ent.User, now time.Time) (string, *Claims, error) {
	sv := u.SecurityVersion
	roles := u.Roles
	if roles == nil {
		roles = []string{}
	}
	c := &Claims{
		Username:        u.Username,
		Roles:           roles,
		SecurityVersion: &sv,
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
// required claims, then the revocations: the in-memory mirror of the
// database's (no I/O), then the shared store's deny-list and user marks
// (which reach every replica sharing Redis at once, before the mirrors
// have read the row). A user revocation refuses the user's tokens issued
// up to its instant and those carrying a lower security version (issued
// later by a login that read the user before the change). It returns
// ErrInvalidToken for any token that must be refused, and an error
// wrapping errs.Unavailable when the shared store cannot be read (the
// token is then not accepted either).
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
	uid, err := c.UserID()
	if err != nil {
		return nil, fmt.Errorf("%w: subject is not a user id", ErrInvalidToken)
	}
	if s.revs != nil {
		if s.revs.jtiRevoked(c.ID) {
			return nil, fmt.Errorf("%w: logged out", ErrInvalidToken)
		}
		if rv, ok := s.revs.userRevocation(uid); ok && rv.refuses(c) {
			return nil, fmt.Errorf("%w: revoked", ErrInvalidToken)
		}
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
	if revoked && parseMark(mark).refuses(c) {
		return nil, fmt.Errorf("%w: revoked", ErrInvalidToken)
	}
	return c, nil
}

// storeUserRevocation records, in tx, that every token of user id issued
// at or before at, or carrying a security version below version, is
// refused (Users.Disable, Users.SetPassword). Without Revocations it does
// nothing: markUser alone keeps it.
func (s *TokenService) storeUserRevocation(ctx context.Context, tx *ent.Tx, id int, at time.Time, version int) error {
	if s.revs == nil {
		return nil
	}
	return s.revs.insert(ctx, tx, kindUser, strconv.Itoa(id), at, s.userRevocationExpiry(at), version)
}

// userRevocationExpiry is when the last token a user revocation at at can
// concern expires: one issued MaxSignInAge after it, by a login that read
// the user before it.
func (s *TokenService) userRevocationExpiry(at time.Time) time.Time {
	return at.Add(s.ttl + MaxSignInAge + time.Second)
}

// markUser, once storeUserRevocation's transaction committed, puts the
// revocation in this process's mirror and in the shared store, where
// every replica sharing it sees it at once (before its mirror reads the
// row). The mark lives as long as the row.
//
// A login that read the user before the commit issues its token after
// it, with the old security version: the version, not the instant,
// refuses that token. When the shared store's mark cannot be written,
// that is logged, not returned: the database holds the revocation and
// the other replicas' mirrors read it within a poll.
func (s *TokenService) markUser(ctx context.Context, id int, at time.Time, version int) error {
	sub := strconv.Itoa(id)
	exp := s.userRevocationExpiry(at)
	if s.revs != nil {
		s.revs.apply(kindUser, sub, at, exp, version)
	}
	mark := formatMark(userRevocation{at: at.UnixMilli(), version: version})
	if err := s.store.Set(ctx, revokedPrefix+sub, mark, exp.Sub(at)); err != nil {
		if s.revs != nil {
			s.revs.log.WarnContext(ctx, "identity: the revocation of a user is stored, but its mark in the shared store could not be written", "user_id", id, "err", err)
			return nil
		}
		return fmt.Errorf("identity: write the revocation of user %d: %w", id, err)
	}
	return nil
}

// userRevocation is what a user revocation refuses: the user's tokens
// issued at or before at (unix ms), and those carrying a security version
// below version.
type userRevocation struct {
	at      int64
	version int
}

// refuses reports whether r refuses the token with claims c.
func (r userRevocation) refuses(c *Claims) bool {
	if issuedAtMillis(c) <= r.at {
		return true
	}
	return c.SecurityVersion != nil && *c.SecurityVersion < r.version
}

// formatMark writes r as the shared store's mark: "<unix ms>:<version>".
func formatMark(r userRevocation) []byte {
	b := strconv.AppendInt(nil, r.at, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, int64(r.version), 10)
}

// parseMark reads a mark of formatMark, or of an earlier release (the
// instant alone: version 0). An unreadable mark refuses every token of
// the user rather than accept one.
func parseMark(b []byte) userRevocation {
	ms, ver, hasVer := strings.Cut(string(b), ":")
	at, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return userRevocation{at: math.MaxInt64}
	}
	r := userRevocation{at: at}
	if hasVer {
		v, err := strconv.Atoi(ver)
		if err != nil {
			return userRevocation{at: math.MaxInt64}
		}
		r.version = v
	}
	return r
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

// Revoke refuses the token with claims c until it expires, on every
// replica: stored in the database (when Revocations are configured)
// before this returns, so that no restart or loss of Redis undoes it, put
// in this process's mirror, and put on the shared store's deny-list,
// which every replica sharing Redis reads at once.
func (s *TokenService) Revoke(ctx context.Context, c *Claims) error {
	// One second more than the remaining lifetime: exp has second
	// resolution, and the entry must not vanish while the token still verifies.
	now := s.now()
	exp := c.ExpiresAt.Add(time.Second)
	ttl := exp.Sub(now)
	if ttl <= 0 {
		return nil
	}
	if s.revs != nil {
		if err := s.revs.insert(ctx, nil, kindJTI, c.ID, now, exp, 0); err != nil {
			return err
		}
		s.revs.apply(kindJTI, c.ID, now, exp, 0)
	}
	if err := s.store.Set(ctx, denyPrefix+c.ID, []byte{1}, ttl); err != nil {
		if s.revs != nil {
			s.revs.log.WarnContext(ctx, "identity: the logout is stored, but the deny-list entry in the shared store could not be written", "err", err)
			return nil
		}
		return fmt.Errorf("identity: write deny-list: %w", err)
	}
	return nil
}
