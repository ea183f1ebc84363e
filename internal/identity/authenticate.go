package identity

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/ent"
	"gatehouse/ent/user"
	"gatehouse/internal/secret"
)

// SignIn is a successful password check: the user as the login read
// them, before the check, and when that read began. Tokens issued from it
// carry the security version of that read (User.SecurityVersion): a
// disable or a new password committed while the check ran has raised the
// version, so they are refused however late they are issued.
type SignIn struct {
	User   *ent.User
	ReadAt time.Time
}

// Authenticate returns the enabled user with that username and password,
// as read before the password check, or ErrInvalidCredentials. An
// unknown username still costs one bcrypt comparison (against a dummy
// hash) and a disabled user is refused only after the password check, so
// response time does not reveal which usernames exist or are disabled.
func (u *Users) Authenticate(ctx context.Context, username, password string) (*SignIn, error) {
	if !plausibleUsername(username) {
		secret.CheckPassword("", password)
		return nil, ErrInvalidCredentials
	}
	readAt := u.now()
	row, err := u.client.User.Query().Where(user.Username(username)).Only(ctx)
	switch {
	case ent.IsNotFound(err):
		secret.CheckPassword("", password)
		return nil, ErrInvalidCredentials
	case err != nil:
		return nil, fmt.Errorf("identity: look up user: %w", err)
	}
	if f := u.afterRead.Load(); f != nil {
		(*f)(ctx, username)
	}
	if !secret.CheckPassword(row.PasswordHash, password) || row.Status != UserEnabled {
		return nil, ErrInvalidCredentials
	}
	return &SignIn{User: row, ReadAt: readAt}, nil
}

// Active returns user id when it exists and is enabled, else ErrInactive.
// Signed-in browser sessions call it on every use, so that disabling a user
// ends their session at once.
func (u *Users) Active(ctx context.Context, id int) (*ent.User, error) {
	row, err := u.client.User.Get(ctx, id)
	switch {
	case ent.IsNotFound(err):
		return nil, ErrInactive
	case err != nil:
		return nil, fmt.Errorf("identity: get user %d: %w", id, err)
	case row.Status != UserEnabled:
		return nil, ErrInactive
	}
	return row, nil
}

// plausibleUsername rejects what no stored username can be before it
// reaches the database: over the length limit, not UTF-8, or holding NUL
// (which Postgres refuses in text, turning a wrong login into an error).
func plausibleUsername(s string) bool {
	return s != "" && len(s) <= MaxUsernameLen && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
