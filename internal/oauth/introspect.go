package oauth

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/authcode"
	"gatehouse/ent/oauthtoken"
	"gatehouse/internal/identity"
	"gatehouse/internal/secret"
)

// Token kinds.
const (
	KindAccess  = "access_token"
	KindRefresh = "refresh_token"
)

// TokenInfo describes a live token.
type TokenInfo struct {
	Kind      string // KindAccess or KindRefresh
	UserID    int
	Username  string
	AppID     int
	ClientID  string
	Scope     string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// Subject is the user id as the "sub" string.
func (t TokenInfo) Subject() string { return strconv.Itoa(t.UserID) }

// maxTokenLen bounds a presented token; ours are about 47 characters.
const maxTokenLen = 512

// find returns the token row whose access or refresh hash matches, with
// its app and user, and which of the two matched; nil when none does.
func (s *Service) find(ctx context.Context, token string, accessOnly bool) (*ent.OAuthToken, string, error) {
	if token == "" || len(token) > maxTokenLen {
		return nil, "", nil
	}
	h := secret.HashToken(token)
	pred := oauthtoken.AccessHash(h)
	if !accessOnly {
		pred = oauthtoken.Or(oauthtoken.AccessHash(h), oauthtoken.RefreshHash(h))
	}
	row, err := s.client.OAuthToken.Query().Where(pred).WithApp().WithUser().Only(ctx)
	if ent.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("oauth: look up token: %w", err)
	}
	if row.AccessHash == h {
		return row, KindAccess, nil
	}
	return row, KindRefresh, nil
}

// live reports whether the token is usable at now: not revoked, not
// expired, its app usable, its user enabled and still at the security
// version of the sign-in the token descends from.
func live(row *ent.OAuthToken, kind string, now time.Time) (TokenInfo, bool) {
	exp := row.AccessExpiresAt
	if kind == KindRefresh {
		exp = row.RefreshExpiresAt
	}
	app, user := row.Edges.App, row.Edges.User
	if row.RevokedAt != nil || !now.Before(exp) || app == nil || user == nil ||
		!usable(app, now) || user.Status != identity.UserEnabled || user.SecurityVersion != row.UserVersion {
		return TokenInfo{}, false
	}
	return TokenInfo{
		Kind:      kind,
		UserID:    user.ID,
		Username:  user.Username,
		AppID:     app.ID,
		ClientID:  app.AppKey,
		Scope:     row.Scope,
		IssuedAt:  row.CreateTime,
		ExpiresAt: exp,
	}, true
}

// AccessToken returns what a live access token grants, or an
// invalid_token *Error for an unknown, expired or revoked one (or one
// whose app or user has been disabled since).
func (s *Service) AccessToken(ctx context.Context, token string) (TokenInfo, error) {
	row, kind, err := s.find(ctx, token, true)
	if err != nil {
		return TokenInfo{}, err
	}
	if row == nil {
		return TokenInfo{}, oauthErr(CodeInvalidToken, "unknown access token")
	}
	info, ok := live(row, kind, s.now())
	if !ok {
		return TokenInfo{}, oauthErr(CodeInvalidToken, "the access token is expired or revoked")
	}
	return info, nil
}

// Introspect (RFC 7662) reports whether token is live, for client c.
// A client only learns about its own tokens: another client's token is
// reported inactive, like an unknown one.
func (s *Service) Introspect(ctx context.Context, c Client, token string) (TokenInfo, bool, error) {
	row, kind, err := s.find(ctx, token, false)
	if err != nil || row == nil || row.AppID != c.AppID {
		return TokenInfo{}, false, err
	}
	info, ok := live(row, kind, s.now())
	return info, ok, nil
}

// Revoke (RFC 7009) revokes the token pair that token (access or refresh)
// belongs to, when it was issued to client c. Unknown tokens and other
// clients' tokens are ignored without error, as the RFC asks: the caller
// learns nothing about them.
func (s *Service) Revoke(ctx context.Context, c Client, token string) error {
	row, _, err := s.find(ctx, token, false)
	if err != nil || row == nil || row.AppID != c.AppID {
		return err
	}
	_, err = s.client.OAuthToken.Update().
		Where(oauthtoken.ID(row.ID), oauthtoken.RevokedAtIsNil()).
		SetRevokedAt(s.now()).Save(ctx)
	if err != nil {
		return fmt.Errorf("oauth: revoke token: %w", err)
	}
	return nil
}

// Purge deletes token rows whose refresh token has expired, and codes
// that expired more than RefreshTTL ago (kept until then so that a replay
// can still revoke the tokens issued from them). It returns how many rows
// went.
func (s *Service) Purge(ctx context.Context) (int, error) {
	now := s.now()
	nt, err := s.client.OAuthToken.Delete().Where(oauthtoken.RefreshExpiresAtLT(now)).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("oauth: purge tokens: %w", err)
	}
	nc, err := s.client.AuthCode.Delete().Where(authcode.ExpiresAtLT(now.Add(-RefreshTTL))).Exec(ctx)
	if err != nil {
		return nt, fmt.Errorf("oauth: purge codes: %w", err)
	}
	return nt + nc, nil
}
