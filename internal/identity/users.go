package identity

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/errs"
	"gatehouse/internal/secret"
)

// ErrConflict: the username is taken. Bad input is an errs.Validation
// error naming the field (GraphQL spelling).
var ErrConflict = errs.New(errs.Conflict, "username already exists")

// Limits of user fields.
const (
	MaxUsernameLen = 64
	MinPasswordLen = 8
	// MaxPasswordLen is bcrypt's limit: it ignores every byte past 72, so a
	// longer password is refused rather than silently truncated.
	MaxPasswordLen = 72
	MaxRoles       = 20
	MaxRoleLen     = 64
)

// User statuses.
const (
	UserDisabled = 0
	UserEnabled  = 1
)

// NewUser is a user to create. Roles may be empty.
type NewUser struct {
	Username string
	Password string
	Roles    []string
}

// ErrNotFound: no user has that id.
var ErrNotFound = errs.New(errs.NotFound, "user not found")

// Users manages the people who sign in (JWT login, OAuth approval).
type Users struct {
	client *ent.Client
	// tokens refuses signed tokens issued before a revocation; nil in
	// tools that only create users (the CLI).
	tokens *TokenService
	// afterRead, when set, runs in Authenticate between reading the user
	// and checking the password (SetAfterRead; tests only).
	afterRead atomic.Pointer[func(ctx context.Context, username string)]
}

// SetAfterRead installs f, which Authenticate calls after it read the
// user and before it checks the password; nil removes it. Only tests use
// it: they hold a login there while an admin changes the user, the window
// a slow password hash leaves open in production.
func (u *Users) SetAfterRead(f func(ctx context.Context, username string)) {
	if f == nil {
		u.afterRead.Store(nil)
		return
	}
	u.afterRead.Store(&f)
}

// UsersOption configures Users.
type UsersOption func(*Users)

// WithTokens lets Users revoke the signed tokens of a user it disables
// or gives a new password (see [Users.Disable]).
func WithTokens(ts *TokenService) UsersOption { return func(u *Users) { u.tokens = ts } }

// NewUsers returns the user service over client.
func NewUsers(client *ent.Client, opts ...UsersOption) *Users {
	u := &Users{client: client}
	for _, o := range opts {
		o(u)
	}
	return u
}

// Create validates and stores an enabled user with a bcrypt hash of the
// password (never the password). A taken username is ErrConflict;
// usernames are compared exactly (case-sensitive), as they are at login.
func (u *Users) Create(ctx context.Context, in NewUser) (*ent.User, error) {
	if err := ValidateUsername(in.Username); err != nil {
		return nil, err
	}
	if err := ValidatePassword(in.Password); err != nil {
		return nil, err
	}
	roles, err := normalizeRoles(in.Roles)
	if err != nil {
		return nil, err
	}
	hash, err := secret.HashPassword(in.Password)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	row, err := u.client.User.Create().
		SetUsername(in.Username).
		SetPasswordHash(hash).
		SetRoles(roles).
		SetStatus(UserEnabled).
		Save(ctx)
	if ent.IsConstraintError(err) {
		return nil, fmt.Errorf("%w: %q", ErrConflict, in.Username)
	}
	if err != nil {
		return nil, fmt.Errorf("create user: %w", err)
	}
	return row, nil
}

// now is the clock of the token service (tests move it), else the wall clock.
func (u *Users) now() time.Time {
	if u.tokens != nil {
		return u.tokens.now()
	}
	return time.Now()
}

// ValidateUsername checks the username rule: 1–64 of [A-Za-z0-9._-].
func ValidateUsername(name string) error {
	if name == "" || len(name) > MaxUsernameLen {
		return errs.Invalid("username", "must be 1 to %d characters", MaxUsernameLen)
	}
	for i := 0; i < len(name); i++ {
		if !usernameChar(name[i]) {
			return errs.Invalid("username", "may only hold letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

// ValidatePassword checks the password rule: 8–72 bytes (bcrypt's limit).
func ValidatePassword(pw string) error {
	if len(pw) < MinPasswordLen || len(pw) > MaxPasswordLen {
		return errs.Invalid("password", "must be %d to %d bytes", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

// normalizeRoles checks roles (at most 20, each 1–64 of [A-Za-z0-9._:-])
// and drops duplicates, keeping the first order.
func normalizeRoles(in []string) ([]string, error) {
	if len(in) > MaxRoles {
		return nil, errs.Invalid("roles", "at most %d", MaxRoles)
	}
	out := make([]string, 0, len(in))
	for _, r := range in {
		if r == "" || len(r) > MaxRoleLen {
			return nil, errs.Invalid("roles", "each must be 1 to %d characters", MaxRoleLen)
		}
		for i := 0; i < len(r); i++ {
			if !usernameChar(r[i]) && r[i] != ':' {
				return nil, errs.Invalid("roles", "%q may only hold letters, digits, '.', '_', ':' and '-'", r)
			}
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func usernameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
