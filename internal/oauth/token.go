package oauth

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"gatehouse/ent"
	"gatehouse/ent/authcode"
	"gatehouse/ent/oauthtoken"
	"gatehouse/ent/user"
	"gatehouse/internal/identity"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
)

// Grant types of the token endpoint.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantRefreshToken      = "refresh_token"
)

// TokenResponse is the body of a successful token request.
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
	TokenType    string `json:"token_type"`
	Scope        string `json:"scope"`
}

// ExchangeCode redeems an authorization code for client c (already
// authenticated). The code must have been issued to c, be unexpired and
// unused, and redirectURI and the PKCE verifier must match what the
// authorization request carried. Any mismatch is invalid_grant.
//
// A code can be redeemed once: the first redemption marks it used in the
// same transaction that stores the tokens, with a compare-and-set, so
// concurrent redemptions yield exactly one token pair. Presenting a used
// code again is treated as a leaked code (RFC 6749 section 4.1.2): it is refused
// and every token issued from it, including refreshed successors, is
// revoked.
func (s *Service) ExchangeCode(ctx context.Context, c Client, code, redirectURI, verifier string) (TokenResponse, error) {
	if code == "" {
		return TokenResponse{}, oauthErr(CodeInvalidRequest, "code is required")
	}
	var (
		resp     TokenResponse
		replayed bool
	)
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		row, err := tx.AuthCode.Query().Where(authcode.CodeHash(secret.HashToken(code))).Only(ctx)
		if ent.IsNotFound(err) {
			return oauthErr(CodeInvalidGrant, "unknown authorization code")
		}
		if err != nil {
			return fmt.Errorf("oauth: load code: %w", err)
		}
		if row.AppID != c.AppID {
			return oauthErr(CodeInvalidGrant, "the code was issued to another client")
		}
		now := s.now()
		if row.UsedAt != nil {
			replayed = true
			return revokeFamily(ctx, tx, row.ID, now)
		}
		switch {
		case !now.Before(row.ExpiresAt):
			return oauthErr(CodeInvalidGrant, "the authorization code has expired")
		case row.RedirectURI != redirectURI:
			return oauthErr(CodeInvalidGrant, "redirect_uri does not match the authorization request")
		case row.CodeChallenge != "" && verifier == "":
			return oauthErr(CodeInvalidGrant, "code_verifier is required")
		case row.CodeChallenge != "" && !verifyPKCE(row.CodeChallenge, verifier):
			return oauthErr(CodeInvalidGrant, "code_verifier does not match the code_challenge")
		case row.CodeChallenge == "" && verifier != "":
			return oauthErr(CodeInvalidGrant, "code_verifier given, but the authorization request had no code_challenge")
		}
		// The user's row first (see activeUser), then the code.
		if err := activeUser(ctx, tx, row.UserID, time.Time{}, row.UserVersion); err != nil {
			return err
		}
		n, err := tx.AuthCode.Update().Where(authcode.ID(row.ID), authcode.UsedAtIsNil()).SetUsedAt(now).Save(ctx)
		if err != nil {
			return fmt.Errorf("oauth: consume code: %w", err)
		}
		if n == 0 { // a concurrent redemption won, or the user's codes were spent
			replayed = true
			return revokeFamily(ctx, tx, row.ID, now)
		}
		codeID := row.ID
		resp, err = issue(ctx, tx, row.AppID, row.UserID, row.UserVersion, &codeID, row.Scope, now)
		return err
	})
	if err != nil {
		return TokenResponse{}, err
	}
	if replayed {
		return TokenResponse{}, oauthErr(CodeInvalidGrant, "the authorization code was already used; tokens issued from it are revoked")
	}
	return resp, nil
}

// Refresh exchanges a refresh token of client c for a new pair and
// revokes the old pair (rotation). scope, when not empty, narrows the
// scope and must be within the original one (RFC 6749 section 6). A refresh
// token that was already rotated or revoked is refused, and the whole
// family of tokens descending from the same authorization is revoked:
// two parties holding one refresh token means it leaked.
func (s *Service) Refresh(ctx context.Context, c Client, refresh, scope string) (TokenResponse, error) {
	if refresh == "" {
		return TokenResponse{}, oauthErr(CodeInvalidRequest, "refresh_token is required")
	}
	var (
		resp     TokenResponse
		replayed bool
	)
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		row, err := tx.OAuthToken.Query().Where(oauthtoken.RefreshHash(secret.HashToken(refresh))).Only(ctx)
		if ent.IsNotFound(err) {
			return oauthErr(CodeInvalidGrant, "unknown refresh token")
		}
		if err != nil {
			return fmt.Errorf("oauth: load refresh token: %w", err)
		}
		if row.AppID != c.AppID {
			return oauthErr(CodeInvalidGrant, "the refresh token was issued to another client")
		}
		now := s.now()
		if row.RevokedAt != nil {
			replayed = true
			return revokeTokenFamily(ctx, tx, row, now)
		}
		if !now.Before(row.RefreshExpiresAt) {
			return oauthErr(CodeInvalidGrant, "the refresh token has expired")
		}
		newScope := row.Scope
		if scope != "" {
			granted := strings.Fields(row.Scope)
			var out []string
			for _, sc := range strings.Fields(scope) {
				if !slices.Contains(granted, sc) {
					return oauthErr(CodeInvalidScope, "scope %q was not granted", sc)
				}
				if !slices.Contains(out, sc) {
					out = append(out, sc)
				}
			}
			newScope = strings.Join(out, " ")
		}
		// The user's row first (see activeUser), then the token.
		if err := activeUser(ctx, tx, row.UserID, time.Time{}, row.UserVersion); err != nil {
			return err
		}
		n, err := tx.OAuthToken.Update().Where(oauthtoken.ID(row.ID), oauthtoken.RevokedAtIsNil()).SetRevokedAt(now).Save(ctx)
		if err != nil {
			return fmt.Errorf("oauth: rotate refresh token: %w", err)
		}
		if n == 0 { // a concurrent refresh won, or the user's tokens were revoked
			replayed = true
			return revokeTokenFamily(ctx, tx, row, now)
		}
		resp, err = issue(ctx, tx, row.AppID, row.UserID, row.UserVersion, row.AuthCodeID, newScope, now)
		return err
	})
	if err != nil {
		return TokenResponse{}, err
	}
	if replayed {
		return TokenResponse{}, oauthErr(CodeInvalidGrant, "the refresh token was already used or revoked; its token family is revoked")
	}
	return resp, nil
}

// activeUser checks that user id is enabled and still has security
// version version (that of the sign-in the code or token descends from;
// unless signedIn is zero, also that nothing was revoked since that
// sign-in) and, on Postgres,
// holds a shared lock on the user's row until tx ends. Disabling the user
// or setting their password updates that row before revoking the user's
// tokens and codes in the same transaction, so the two serialize: a token
// or code issued here either commits before the revocation starts (and is
// revoked by it) or waits for it and then finds the user disabled, the
// sign-in revoked, its code spent or its refresh token revoked. Without
// the lock, a row inserted while the revocation ran would be invisible to
// it and outlive a password reset. (SQLite runs one writing transaction at
// a time.) Callers lock the user before the code or token row, in the
// revocation's order, so the two cannot deadlock.
func activeUser(ctx context.Context, tx *ent.Tx, id int, signedIn time.Time, version int) error {
	u, err := tx.User.Query().Where(user.ID(id)).Select(user.FieldStatus, user.FieldTokensRevokedAt, user.FieldSecurityVersion).
		Modify(func(s *entsql.Selector) {
			if s.Dialect() == dialect.Postgres {
				s.ForShare()
			}
		}).Only(ctx)
	if ent.IsNotFound(err) {
		return oauthErr(CodeInvalidGrant, "the user is no longer active")
	}
	if err != nil {
		return fmt.Errorf("oauth: load user: %w", err)
	}
	if u.Status != identity.UserEnabled {
		return oauthErr(CodeInvalidGrant, "the user is no longer active")
	}
	if u.SecurityVersion != version || !signedIn.IsZero() && u.TokensRevokedAt != nil && !signedIn.After(*u.TokensRevokedAt) {
		return oauthErr(CodeInvalidGrant, "the sign-in ended (the password was changed or the account disabled); sign in again")
	}
	return nil
}

// issue stores a new token pair (hashes only), carrying userVersion (the
// user's security version at the sign-in it descends from), and returns
// it in plain text.
func issue(ctx context.Context, tx *ent.Tx, appID, userID, userVersion int, codeID *int, scope string, now time.Time) (TokenResponse, error) {
	access := secret.RandomToken(accessPrefix, tokenBytes)
	refresh := secret.RandomToken(refreshPrefix, tokenBytes)
	_, err := tx.OAuthToken.Create().
		SetAccessHash(secret.HashToken(access)).
		SetRefreshHash(secret.HashToken(refresh)).
		SetAppID(appID).
		SetUserID(userID).
		SetUserVersion(userVersion).
		SetNillableAuthCodeID(codeID).
		SetScope(scope).
		SetAccessExpiresAt(now.Add(AccessTTL)).
		SetRefreshExpiresAt(now.Add(RefreshTTL)).
		SetCreateTime(now).
		Save(ctx)
	if err != nil {
		return TokenResponse{}, fmt.Errorf("oauth: store tokens: %w", err)
	}
	return TokenResponse{
		AccessToken:  access,
		RefreshToken: refresh,
		ExpiresIn:    int64(AccessTTL / time.Second),
		TokenType:    "Bearer",
		Scope:        scope,
	}, nil
}

// revokeFamily revokes every token issued from authorization code codeID.
func revokeFamily(ctx context.Context, tx *ent.Tx, codeID int, now time.Time) error {
	_, err := tx.OAuthToken.Update().
		Where(oauthtoken.AuthCodeID(codeID), oauthtoken.RevokedAtIsNil()).
		SetRevokedAt(now).Save(ctx)
	if err != nil {
		return fmt.Errorf("oauth: revoke tokens of code %d: %w", codeID, err)
	}
	return nil
}

// revokeTokenFamily revokes the family of row: the tokens from its code,
// or row alone when it has none.
func revokeTokenFamily(ctx context.Context, tx *ent.Tx, row *ent.OAuthToken, now time.Time) error {
	if row.AuthCodeID != nil {
		return revokeFamily(ctx, tx, *row.AuthCodeID, now)
	}
	_, err := tx.OAuthToken.Update().Where(oauthtoken.ID(row.ID), oauthtoken.RevokedAtIsNil()).SetRevokedAt(now).Save(ctx)
	if err != nil {
		return fmt.Errorf("oauth: revoke token %d: %w", row.ID, err)
	}
	return nil
}
