package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gatehouse/ent"
	"gatehouse/internal/secret"
)

// ErrConflict: the username is taken.
var ErrConflict = errors.New("username already exists")

// ValidationError is an input that breaks a rule, with a message fit for
// the caller. Field names the input field (GraphQL spelling).
type ValidationError struct {
	Field string
	Msg   string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Msg }

func invalidUser(field, format string, args ...any) error {
	return &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

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

// Users manages the people who sign in (JWT login, OAuth approval).
type Users struct {
	client *ent.Client
}

// NewUsers returns the user service over client.
func NewUsers(client *ent.Client) *Users { return &Users{client: client} }

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

// ValidateUsername checks the username rule: 1–64 of [A-Za-z0-9._-].
func ValidateUsername(name string) error {
	if name == "" || len(name) > MaxUsernameLen {
		return invalidUser("username", "must be 1 to %d characters", MaxUsernameLen)
	}
	for i := 0; i < len(name); i++ {
		if !usernameChar(name[i]) {
			return invalidUser("username", "may only hold letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

// ValidatePassword checks the password rule: 8–72 bytes (bcrypt's limit).
func ValidatePassword(pw string) error {
	if len(pw) < MinPasswordLen || len(pw) > MaxPasswordLen {
		return invalidUser("password", "must be %d to %d bytes", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

// normalizeRoles checks roles (at most 20, each 1–64 of [A-Za-z0-9._:-])
// and drops duplicates, keeping the first order.
func normalizeRoles(in []string) ([]string, error) {
	if len(in) > MaxRoles {
		return nil, invalidUser("roles", "at most %d", MaxRoles)
	}
	out := make([]string, 0, len(in))
	for _, r := range in {
		if r == "" || len(r) > MaxRoleLen {
			return nil, invalidUser("roles", "each must be 1 to %d characters", MaxRoleLen)
		}
		for i := 0; i < len(r); i++ {
			if !usernameChar(r[i]) && r[i] != ':' {
				return nil, invalidUser("roles", "%q may only hold letters, digits, '.', '_', ':' and '-'", r)
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
