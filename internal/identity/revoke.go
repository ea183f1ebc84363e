package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/authcode"
	"gatehouse/ent/oauthtoken"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
)

// Disabling a user or giving them a new password ends everything they
// signed in with before, on every replica:
//
//   - the user's security version goes up by one in the change's
//     transaction. Every token carries the version its login read before
//     the password check, so a login that was checking the password while
//     the change committed issues a token that is refused, however late;
//   - signed tokens (JWT): a revocation row (kind "user": tokens issued at
//     or before this instant, or carrying a lower security version, are
//     refused) is inserted in the same transaction as the change, so it
//     is as durable as the change itself;
//     every replica's mirror of the revocations holds it (see
//     Revocations), and a per-user mark in the shared store (Redis, or
//     memory for one replica) carries it to every replica sharing Redis at
//     once. Verify reads both, without a database read. Both live as long
//     as a token can (the JWT lifetime), after which every earlier token
//     has expired anyway;
//   - OAuth access and refresh tokens: revoked in the database, in the
//     same transaction as the change (enabling the user again does not
//     bring them back), and unused authorization codes are spent; their
//     rows also carry the version of their sign-in, compared with the
//     user's on every use (which reads the user row anyway);
//   - browser sessions of the authorization flow: the session's sign-in
//     time and security version are compared with the user row's
//     tokens_revoked_at and security_version on every use (the session
//     already reads the user row).

// Disable disables user id: they cannot sign in, and their signed tokens,
// OAuth tokens and sessions are refused from now on. Disabling a disabled
// user is not an error (and revokes again).
func (u *Users) Disable(ctx context.Context, id int) (*ent.User, error) {
	return u.revoke(ctx, id, func(m *ent.UserUpdateOne) { m.SetStatus(UserDisabled) })
}

// Enable lets user id sign in again. Tokens and sessions ended by an
// earlier Disable stay ended: the user signs in anew.
func (u *Users) Enable(ctx context.Context, id int) (*ent.User, error) {
	row, err := u.client.User.UpdateOneID(id).SetStatus(UserEnabled).Save(ctx)
	if ent.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("enable user %d: %w", id, err)
	}
	return row, nil
}

// SetPassword gives user id a new password (the rules and hashing of
// Create) and ends everything they signed in with before, as Disable does:
// a password is reset because the old one may be known to someone else,
// and that someone may already hold a token.
func (u *Users) SetPassword(ctx context.Context, id int, password string) (*ent.User, error) {
	if err := ValidatePassword(password); err != nil {
		return nil, err
	}
	hash, err := secret.HashPassword(password)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	return u.revoke(ctx, id, func(m *ent.UserUpdateOne) { m.SetPasswordHash(hash) })
}

// revoke applies change to user id, revokes their OAuth tokens and codes
// and stores the revocation of their signed tokens in one transaction,
// then puts that revocation in the mirror and the shared store. Without
// Revocations (tools, tests) the shared store alone holds it: when it
// cannot be written the call fails (the change itself is made: calling
// again writes the mark).
func (u *Users) revoke(ctx context.Context, id int, change func(*ent.UserUpdateOne)) (*ent.User, error) {
	if u.tokens == nil {
		return nil, errors.New("identity: users were built without a token service; cannot revoke tokens")
	}
	var (
		row *ent.User
		now time.Time
	)
	err := store.WithTx(ctx, u.client, func(tx *ent.Tx) error {
		now = u.tokens.now()
		m := tx.User.UpdateOneID(id).SetTokensRevokedAt(now).AddSecurityVersion(1)
		change(m)
		var err error
		if row, err = m.Save(ctx); err != nil {
			return err
		}
		if _, err := tx.OAuthToken.Update().
			Where(oauthtoken.UserID(id), oauthtoken.RevokedAtIsNil()).
			SetRevokedAt(now).Save(ctx); err != nil {
			return fmt.Errorf("revoke OAuth tokens: %w", err)
		}
		if _, err := tx.AuthCode.Update().
			Where(authcode.UserID(id), authcode.UsedAtIsNil()).
			SetUsedAt(now).Save(ctx); err != nil {
			return fmt.Errorf("spend authorization codes: %w", err)
		}
		return u.tokens.storeUserRevocation(ctx, tx, id, now, row.SecurityVersion)
	})
	if ent.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("update user %d: %w", id, err)
	}
	if err := u.tokens.markUser(ctx, id, now, row.SecurityVersion); err != nil {
		return nil, err
	}
	return row, nil
}

// ActiveSince returns user id when it exists, is enabled, and nothing was
// revoked since a browser session's sign-in: signedIn is when it signed
// in, version the security version its login read (SignIn). Else
// ErrInactive.
func (u *Users) ActiveSince(ctx context.Context, id int, signedIn time.Time, version int) (*ent.User, error) {
	row, err := u.Active(ctx, id)
	if err != nil {
		return nil, err
	}
	if row.TokensRevokedAt != nil && !signedIn.After(*row.TokensRevokedAt) || row.SecurityVersion != version {
		return nil, ErrInactive
	}
	return row, nil
}
