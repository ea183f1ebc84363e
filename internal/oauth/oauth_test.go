package oauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"gatehouse/internal/store/storetest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"gatehouse/ent"
	"gatehouse/internal/identity"
	"gatehouse/internal/oauth"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

func TestMain(m *testing.M) {
	secret.PasswordCost = bcrypt.MinCost
	os.Exit(m.Run())
}

type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }

const redirect = "https://client.example/cb"

// fixture is a database with two partner apps (OAuth clients) and a user.
type fixture struct {
	db        *store.DB
	clock     *fakeClock
	svc       *oauth.Service
	partners  *partner.Service
	app       partner.App
	secret    string
	other     partner.App
	otherSec  string
	user      *ent.User
	users     *identity.Users
	masterKey []byte
}

func setup(t *testing.T, b testenv.Backend) *fixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, b)
	f := &fixture{db: db, clock: &fakeClock{}, masterKey: secret.RandomBytes(32)}
	f.clock.ns.Store(time.Now().UnixNano())
	var err error
	if f.partners, err = partner.NewService(db.Client, f.masterKey, partner.WithClock(f.clock.now)); err != nil {
		t.Fatal(err)
	}
	app, sec, err := f.partners.Create(ctx, partner.CreateInput{
		AppName: "Client One", RedirectURIs: []string{redirect, "https://client.example/other?x=1"},
		Scopes: []string{"orders:read", "profile"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.app, f.secret = app, sec.AppSecret
	other, osec, err := f.partners.Create(ctx, partner.CreateInput{AppName: "Client Two", RedirectURIs: []string{redirect}, Scopes: []string{"profile"}})
	if err != nil {
		t.Fatal(err)
	}
	f.other, f.otherSec = other, osec.AppSecret
	f.users = identity.NewUsers(db.Client)
	if f.user, err = f.users.Create(ctx, identity.NewUser{Username: "alice", Password: "correct horse"}); err != nil {
		t.Fatal(err)
	}
	if f.svc, err = oauth.NewService(db.Client, f.masterKey, oauth.WithClock(f.clock.now)); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) client(t *testing.T) oauth.Client {
	t.Helper()
	c, err := f.svc.AuthenticateClient(context.Background(), f.app.AppKey, f.secret)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// code runs Authorize and IssueCode for f.app and alice.
func (f *fixture) code(t *testing.T, req oauth.AuthorizeRequest) string {
	t.Helper()
	ctx := context.Background()
	if req.ClientID == "" {
		req.ClientID = f.app.AppKey
	}
	if req.RedirectURI == "" {
		req.RedirectURI = redirect
	}
	p, err := f.svc.Authorize(ctx, req)
	if err != nil {
		t.Fatalf("authorize: %v", err)
	}
	// Signed in just now: the user's current security version.
	code, err := f.svc.IssueCode(ctx, p, f.user.ID, time.Now(), f.db.User.GetX(ctx, f.user.ID).SecurityVersion)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if !oauth.IsCode(err, code) {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
}

func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func TestAuthorizeValidation(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		ctx := context.Background()
		disabled := partner.Disabled
		off, _, err := f.partners.Create(ctx, partner.CreateInput{AppName: "off", RedirectURIs: []string{redirect}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.partners.Update(ctx, off.ID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		yesterday := f.clock.now().AddDate(0, 0, -1)
		expired, _, err := f.partners.Create(ctx, partner.CreateInput{AppName: "expired", RedirectURIs: []string{redirect}, ExpireDate: &yesterday})
		if err != nil {
			t.Fatal(err)
		}
		good := challenge(strings.Repeat("v", 43))
		for _, c := range []struct {
			name         string
			req          oauth.AuthorizeRequest
			code         string
			redirectable bool
		}{
			{"unknown client", oauth.AuthorizeRequest{ClientID: "nope", RedirectURI: redirect}, oauth.CodeInvalidClient, false},
			{"no client", oauth.AuthorizeRequest{RedirectURI: redirect}, oauth.CodeInvalidClient, false},
			{"client id with NUL", oauth.AuthorizeRequest{ClientID: "a\x00b", RedirectURI: redirect}, oauth.CodeInvalidClient, false},
			{"disabled app", oauth.AuthorizeRequest{ClientID: off.AppKey, RedirectURI: redirect}, oauth.CodeInvalidClient, false},
			{"expired app", oauth.AuthorizeRequest{ClientID: expired.AppKey, RedirectURI: redirect}, oauth.CodeInvalidClient, false},
			{"no redirect", oauth.AuthorizeRequest{ClientID: f.app.AppKey}, oauth.CodeInvalidRequest, false},
			{"unregistered redirect", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: "https://evil.example/cb"}, oauth.CodeInvalidRequest, false},
			{"redirect prefix only", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect + "/more"}, oauth.CodeInvalidRequest, false},
			{"redirect with extra query", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect + "?a=b"}, oauth.CodeInvalidRequest, false},
			{"redirect other case", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: strings.ToUpper(redirect)}, oauth.CodeInvalidRequest, false},
			{"response_type token", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect, ResponseType: "token"}, oauth.CodeUnsupportedResponseType, true},
			{"scope not allowed", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect, Scope: "profile admin"}, oauth.CodeInvalidScope, true},
			{"PKCE plain", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect, CodeChallenge: good, CodeChallengeMethod: "plain"}, oauth.CodeInvalidRequest, true},
			{"PKCE method missing", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect, CodeChallenge: good}, oauth.CodeInvalidRequest, true},
			{"PKCE challenge missing", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect, CodeChallengeMethod: "S256"}, oauth.CodeInvalidRequest, true},
			{"PKCE challenge short", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect, CodeChallenge: "abc", CodeChallengeMethod: "S256"}, oauth.CodeInvalidRequest, true},
			{"state too long", oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect, State: strings.Repeat("s", 1025)}, oauth.CodeInvalidRequest, true},
		} {
			p, err := f.svc.Authorize(ctx, c.req)
			var oe *oauth.Error
			if !oauth.IsCode(err, c.code) {
				t.Errorf("%s: got %v, want %s", c.name, err, c.code)
				continue
			}
			oe = err.(*oauth.Error)
			if oe.Redirectable != c.redirectable {
				t.Errorf("%s: redirectable = %v", c.name, oe.Redirectable)
			}
			if c.redirectable && p.RedirectURI != c.req.RedirectURI {
				t.Errorf("%s: redirectable error without the redirect URI", c.name)
			}
		}
		p, err := f.svc.Authorize(ctx, oauth.AuthorizeRequest{
			ClientID: f.app.AppKey, RedirectURI: "https://client.example/other?x=1", ResponseType: "code",
			Scope: "profile orders:read profile", State: "xyz", CodeChallenge: good, CodeChallengeMethod: "S256",
		})
		if err != nil {
			t.Fatal(err)
		}
		if p.Scope != "profile orders:read" || p.State != "xyz" || p.AppName != "Client One" || p.CodeChallenge != good {
			t.Fatalf("pending %+v", p)
		}
	})
}

func TestClientAuthentication(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		ctx := context.Background()
		if c, err := f.svc.AuthenticateClient(ctx, f.app.AppKey, f.secret); err != nil || c.AppID != f.app.ID {
			t.Fatalf("right secret: %+v %v", c, err)
		}
		for name, cred := range map[string][2]string{
			"wrong secret":       {f.app.AppKey, f.secret + "x"},
			"empty secret":       {f.app.AppKey, ""},
			"other app's secret": {f.app.AppKey, f.otherSec},
			"unknown client":     {"nope", f.secret},
		} {
			_, err := f.svc.AuthenticateClient(ctx, cred[0], cred[1])
			wantCode(t, name, err, oauth.CodeInvalidClient)
		}
		// Rotation: both secrets work for 24 h, then only the new one.
		_, newSecret, err := f.partners.RotateSecret(ctx, f.app.ID)
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]string{"old": f.secret, "new": newSecret} {
			if _, err := f.svc.AuthenticateClient(ctx, f.app.AppKey, s); err != nil {
				t.Errorf("%s secret during the overlap: %v", name, err)
			}
		}
		f.clock.add(partner.RotationOverlap + time.Second)
		_, err = f.svc.AuthenticateClient(ctx, f.app.AppKey, f.secret)
		wantCode(t, "old secret after the overlap", err, oauth.CodeInvalidClient)
		if _, err := f.svc.AuthenticateClient(ctx, f.app.AppKey, newSecret); err != nil {
			t.Fatalf("new secret after the overlap: %v", err)
		}
		// A disabled app cannot authenticate.
		disabled := partner.Disabled
		if _, err := f.partners.Update(ctx, f.app.ID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.AuthenticateClient(ctx, f.app.AppKey, newSecret)
		wantCode(t, "disabled app", err, oauth.CodeInvalidClient)
	})
}

func TestExchangeCode(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		ctx := context.Background()
		c := f.client(t)
		code := f.code(t, oauth.AuthorizeRequest{Scope: "profile", State: "s"})
		// Stored hashed: the plain code is nowhere in the table.
		rows, err := f.db.AuthCode.Query().All(ctx)
		if err != nil || len(rows) != 1 || rows[0].CodeHash != secret.HashToken(code) || strings.Contains(rows[0].CodeHash, code) {
			t.Fatalf("stored code: %v %v", rows, err)
		}
		if got := rows[0].ExpiresAt.Sub(rows[0].CreateTime); got != oauth.CodeTTL {
			t.Fatalf("code lifetime %v", got)
		}

		_, err = f.svc.ExchangeCode(ctx, c, code, "https://client.example/other?x=1", "")
		wantCode(t, "other redirect_uri", err, oauth.CodeInvalidGrant)
		_, err = f.svc.ExchangeCode(ctx, c, code, "", "")
		wantCode(t, "no redirect_uri", err, oauth.CodeInvalidGrant)
		oc, err := f.svc.AuthenticateClient(ctx, f.other.AppKey, f.otherSec)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.ExchangeCode(ctx, oc, code, redirect, "")
		wantCode(t, "another client", err, oauth.CodeInvalidGrant)
		_, err = f.svc.ExchangeCode(ctx, c, code, redirect, strings.Repeat("v", 43))
		wantCode(t, "verifier without challenge", err, oauth.CodeInvalidGrant)
		_, err = f.svc.ExchangeCode(ctx, c, "ghc_unknown", redirect, "")
		wantCode(t, "unknown code", err, oauth.CodeInvalidGrant)
		_, err = f.svc.ExchangeCode(ctx, c, "", redirect, "")
		wantCode(t, "no code", err, oauth.CodeInvalidRequest)

		// The failed attempts did not consume it.
		tok, err := f.svc.ExchangeCode(ctx, c, code, redirect, "")
		if err != nil {
			t.Fatal(err)
		}
		if tok.TokenType != "Bearer" || tok.ExpiresIn != 7200 || tok.Scope != "profile" ||
			!strings.HasPrefix(tok.AccessToken, "gha_") || !strings.HasPrefix(tok.RefreshToken, "ghr_") {
			t.Fatalf("token response %+v", tok)
		}
		row, err := f.db.OAuthToken.Query().Only(ctx)
		if err != nil || row.AccessHash != secret.HashToken(tok.AccessToken) || row.RefreshHash != secret.HashToken(tok.RefreshToken) {
			t.Fatalf("stored tokens: %+v %v", row, err)
		}
		if got := row.AccessExpiresAt.Sub(row.CreateTime); got != 7200*time.Second {
			t.Fatalf("access lifetime %v", got)
		}
		info, err := f.svc.AccessToken(ctx, tok.AccessToken)
		if err != nil || info.Username != "alice" || info.ClientID != f.app.AppKey || info.Scope != "profile" || info.Subject() == "" {
			t.Fatalf("access token info %+v %v", info, err)
		}

		// Reuse: refused, and the tokens issued from the code are revoked.
		_, err = f.svc.ExchangeCode(ctx, c, code, redirect, "")
		wantCode(t, "reused code", err, oauth.CodeInvalidGrant)
		_, err = f.svc.AccessToken(ctx, tok.AccessToken)
		wantCode(t, "access token after code reuse", err, oauth.CodeInvalidToken)
		_, err = f.svc.Refresh(ctx, c, tok.RefreshToken, "")
		wantCode(t, "refresh token after code reuse", err, oauth.CodeInvalidGrant)

		// Expiry: a code is good for 10 minutes.
		code = f.code(t, oauth.AuthorizeRequest{})
		f.clock.add(oauth.CodeTTL)
		_, err = f.svc.ExchangeCode(ctx, c, code, redirect, "")
		wantCode(t, "expired code", err, oauth.CodeInvalidGrant)
		code = f.code(t, oauth.AuthorizeRequest{})
		f.clock.add(oauth.CodeTTL - time.Second)
		if _, err := f.svc.ExchangeCode(ctx, c, code, redirect, ""); err != nil {
			t.Fatalf("code one second before expiry: %v", err)
		}

		// A disabled user's code is refused.
		code = f.code(t, oauth.AuthorizeRequest{})
		if _, err := f.db.User.UpdateOneID(f.user.ID).SetStatus(identity.UserDisabled).Save(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.ExchangeCode(ctx, c, code, redirect, "")
		wantCode(t, "disabled user", err, oauth.CodeInvalidGrant)
	})
}

func TestExchangeCodePKCE(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		ctx := context.Background()
		c := f.client(t)
		verifier := secret.RandomToken("", 32)
		code := f.code(t, oauth.AuthorizeRequest{CodeChallenge: challenge(verifier), CodeChallengeMethod: "S256"})
		_, err := f.svc.ExchangeCode(ctx, c, code, redirect, "")
		wantCode(t, "no verifier", err, oauth.CodeInvalidGrant)
		_, err = f.svc.ExchangeCode(ctx, c, code, redirect, secret.RandomToken("", 32))
		wantCode(t, "wrong verifier", err, oauth.CodeInvalidGrant)
		_, err = f.svc.ExchangeCode(ctx, c, code, redirect, challenge(verifier))
		wantCode(t, "challenge as verifier", err, oauth.CodeInvalidGrant)
		if _, err := f.svc.ExchangeCode(ctx, c, code, redirect, verifier); err != nil {
			t.Fatalf("right verifier: %v", err)
		}
	})
}

// TestExchangeCodeConcurrent: of many simultaneous redemptions of one
// code exactly one gets tokens, and since the code was presented again,
// those tokens end up revoked.
func TestExchangeCodeConcurrent(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		ctx := context.Background()
		c := f.client(t)
		code := f.code(t, oauth.AuthorizeRequest{})
		const n = 8
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			tokens []oauth.TokenResponse
			grants int
			start  = make(chan struct{})
		)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				tok, err := f.svc.ExchangeCode(ctx, c, code, redirect, "")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					tokens = append(tokens, tok)
				case oauth.IsCode(err, oauth.CodeInvalidGrant):
					grants++
				default:
					t.Errorf("exchange: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(tokens) != 1 || grants != n-1 {
			t.Fatalf("%d successes and %d invalid_grant, want 1 and %d", len(tokens), grants, n-1)
		}
		if count := f.db.OAuthToken.Query().CountX(ctx); count != 1 {
			t.Fatalf("%d token rows, want 1", count)
		}
		_, err := f.svc.AccessToken(ctx, tokens[0].AccessToken)
		wantCode(t, "the winner's token after the replays", err, oauth.CodeInvalidToken)
	})
}

func TestRefresh(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		ctx := context.Background()
		c := f.client(t)
		first, err := f.svc.ExchangeCode(ctx, c, f.code(t, oauth.AuthorizeRequest{Scope: "orders:read profile"}), redirect, "")
		if err != nil {
			t.Fatal(err)
		}
		oc, _ := f.svc.AuthenticateClient(ctx, f.other.AppKey, f.otherSec)
		_, err = f.svc.Refresh(ctx, oc, first.RefreshToken, "")
		wantCode(t, "another client's refresh token", err, oauth.CodeInvalidGrant)
		_, err = f.svc.Refresh(ctx, c, first.RefreshToken, "profile admin")
		wantCode(t, "widening the scope", err, oauth.CodeInvalidScope)
		_, err = f.svc.Refresh(ctx, c, first.AccessToken, "")
		wantCode(t, "an access token as refresh token", err, oauth.CodeInvalidGrant)

		second, err := f.svc.Refresh(ctx, c, first.RefreshToken, "profile")
		if err != nil {
			t.Fatal(err)
		}
		if second.Scope != "profile" || second.AccessToken == first.AccessToken || second.RefreshToken == first.RefreshToken {
			t.Fatalf("refreshed pair %+v", second)
		}
		_, err = f.svc.AccessToken(ctx, first.AccessToken)
		wantCode(t, "the replaced access token", err, oauth.CodeInvalidToken)
		if _, err := f.svc.AccessToken(ctx, second.AccessToken); err != nil {
			t.Fatalf("new access token: %v", err)
		}
		// Replaying the rotated refresh token revokes the family.
		_, err = f.svc.Refresh(ctx, c, first.RefreshToken, "")
		wantCode(t, "a rotated refresh token", err, oauth.CodeInvalidGrant)
		_, err = f.svc.AccessToken(ctx, second.AccessToken)
		wantCode(t, "the family after a replay", err, oauth.CodeInvalidToken)
		_, err = f.svc.Refresh(ctx, c, second.RefreshToken, "")
		wantCode(t, "the family's refresh token after a replay", err, oauth.CodeInvalidGrant)

		// Expiry of access and refresh tokens.
		third, err := f.svc.ExchangeCode(ctx, c, f.code(t, oauth.AuthorizeRequest{}), redirect, "")
		if err != nil {
			t.Fatal(err)
		}
		f.clock.add(oauth.AccessTTL)
		_, err = f.svc.AccessToken(ctx, third.AccessToken)
		wantCode(t, "access token after 7200 s", err, oauth.CodeInvalidToken)
		fourth, err := f.svc.Refresh(ctx, c, third.RefreshToken, "")
		if err != nil {
			t.Fatalf("refresh after the access token expired: %v", err)
		}
		f.clock.add(oauth.RefreshTTL)
		_, err = f.svc.Refresh(ctx, c, fourth.RefreshToken, "")
		wantCode(t, "expired refresh token", err, oauth.CodeInvalidGrant)
	})
}

func TestRevokeIntrospectPurge(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		ctx := context.Background()
		c := f.client(t)
		oc, _ := f.svc.AuthenticateClient(ctx, f.other.AppKey, f.otherSec)
		tok, err := f.svc.ExchangeCode(ctx, c, f.code(t, oauth.AuthorizeRequest{Scope: "profile"}), redirect, "")
		if err != nil {
			t.Fatal(err)
		}
		info, active, err := f.svc.Introspect(ctx, c, tok.AccessToken)
		if err != nil || !active || info.Kind != oauth.KindAccess || info.Username != "alice" || info.Scope != "profile" {
			t.Fatalf("introspect access: %+v %v %v", info, active, err)
		}
		info, active, _ = f.svc.Introspect(ctx, c, tok.RefreshToken)
		if !active || info.Kind != oauth.KindRefresh {
			t.Fatalf("introspect refresh: %+v %v", info, active)
		}
		if _, active, _ := f.svc.Introspect(ctx, oc, tok.AccessToken); active {
			t.Fatal("another client sees the token as active")
		}
		if _, active, _ := f.svc.Introspect(ctx, c, "gha_nope"); active {
			t.Fatal("unknown token active")
		}
		// Another client's revocation is ignored.
		if err := f.svc.Revoke(ctx, oc, tok.AccessToken); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.AccessToken(ctx, tok.AccessToken); err != nil {
			t.Fatalf("another client revoked the token: %v", err)
		}
		// Revoking the refresh token ends the pair.
		if err := f.svc.Revoke(ctx, c, tok.RefreshToken); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.AccessToken(ctx, tok.AccessToken)
		wantCode(t, "access token after revoking its refresh token", err, oauth.CodeInvalidToken)
		if err := f.svc.Revoke(ctx, c, "unknown"); err != nil {
			t.Fatalf("revoking an unknown token: %v", err)
		}

		f.clock.add(oauth.RefreshTTL + oauth.CodeTTL + time.Second)
		n, err := f.svc.Purge(ctx)
		if err != nil || n != 2 {
			t.Fatalf("purge: %d %v, want the token and the code", n, err)
		}
	})
}
