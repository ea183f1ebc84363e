package identity_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gatehouse/internal/errs"
	"gatehouse/internal/identity"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// TestRevokeUser: disabling a user or setting their password refuses
// every signed token issued up to then (and none issued after, even in the
// same second), revokes their OAuth tokens and spends their codes in the
// database, and ends sessions signed in before; enabling brings nothing
// back. On both backends (memory or Redis for the marks).
func TestRevokeUser(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db, store := backend(t, b)
		ctx := context.Background()
		// A whole second, so that the tokens below share one iat.
		clock := newFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
		ts, err := identity.NewTokenService(testKey(), time.Hour, store, identity.WithTokenClock(clock.now))
		if err != nil {
			t.Fatal(err)
		}
		users := identity.NewUsers(db.Client, identity.WithTokens(ts))
		alice := mustCreate(t, users, "alice", "password-1")
		bob := mustCreate(t, users, "bob", "password-1")

		// OAuth rows of alice (and one of bob's, which must stay live).
		pc, err := partner.NewService(db.Client, secret.RandomBytes(32))
		if err != nil {
			t.Fatal(err)
		}
		app, _, err := pc.Create(ctx, partner.CreateInput{AppName: "client"})
		if err != nil {
			t.Fatal(err)
		}
		tok := func(userID int) int {
			row := db.OAuthToken.Create().SetAccessHash(secret.RandomToken("", 8)).SetRefreshHash(secret.RandomToken("", 8)).
				SetAppID(app.ID).SetUserID(userID).SetScope("profile").
				SetAccessExpiresAt(clock.now().Add(time.Hour)).SetRefreshExpiresAt(clock.now().Add(time.Hour)).SetCreateTime(clock.now()).SaveX(ctx)
			return row.ID
		}
		aliceTok, bobTok := tok(alice.ID), tok(bob.ID)
		code := db.AuthCode.Create().SetCodeHash(secret.RandomToken("", 8)).SetAppID(app.ID).SetUserID(alice.ID).
			SetRedirectURI("https://c.example/cb").SetScope("profile").SetExpiresAt(clock.now().Add(time.Minute)).SaveX(ctx)

		before, _, _ := ts.Issue(alice)
		bobs, _, _ := ts.Issue(bob)
		clock.add(300 * time.Millisecond)
		u, err := users.Disable(ctx, alice.ID)
		if err != nil || u.Status != identity.UserDisabled || u.TokensRevokedAt == nil {
			t.Fatalf("disable: %+v, %v", u, err)
		}
		if _, err := ts.Verify(ctx, before); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("a token from before the disable: %v", err)
		}
		if _, err := ts.Verify(ctx, bobs); err != nil {
			t.Fatalf("another user's token: %v", err)
		}
		if r := db.OAuthToken.GetX(ctx, aliceTok); r.RevokedAt == nil {
			t.Fatal("alice's OAuth tokens are not revoked")
		}
		if r := db.OAuthToken.GetX(ctx, bobTok); r.RevokedAt != nil {
			t.Fatal("bob's OAuth tokens were revoked")
		}
		if r := db.AuthCode.GetX(ctx, code.ID); r.UsedAt == nil {
			t.Fatal("alice's unused authorization code can still be exchanged")
		}
		signedIn := clock.now().Add(-time.Second)
		if _, err := users.ActiveSince(ctx, alice.ID, signedIn, 0); !errors.Is(err, identity.ErrInactive) {
			t.Fatalf("session of a disabled user: %v", err)
		}

		// Enabled again within the same second: a token issued now is good,
		// the old one stays refused, the revoked OAuth token stays revoked.
		clock.add(300 * time.Millisecond)
		if _, err := users.Enable(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		stale := alice
		alice = db.User.GetX(ctx, alice.ID) // a login reads the user anew
		after, c, _ := ts.Issue(alice)
		if c.IssuedAt.Unix() != time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix() {
			t.Fatal("the test wants both tokens in one second")
		}
		if _, err := ts.Verify(ctx, after); err != nil {
			t.Fatalf("a token issued after the disable: %v", err)
		}
		if _, err := ts.Verify(ctx, before); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("enable brought back an old token: %v", err)
		}
		if r := db.OAuthToken.GetX(ctx, aliceTok); r.RevokedAt == nil {
			t.Fatal("enable brought back an OAuth token")
		}
		if _, err := users.ActiveSince(ctx, alice.ID, signedIn, 0); !errors.Is(err, identity.ErrInactive) {
			t.Fatal("enable brought back a session")
		}
		if _, err := users.ActiveSince(ctx, alice.ID, clock.now(), alice.SecurityVersion); err != nil {
			t.Fatalf("a session signed in after the revocation: %v", err)
		}
		// A login that read the user before the disable finishes now:
		// its token and its session carry the old security version and
		// are refused, though issued after the revocation's instant.
		late, _, _ := ts.Issue(stale)
		if _, err := ts.Verify(ctx, late); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("a token from a login that read the user before the disable: %v", err)
		}
		if _, err := users.ActiveSince(ctx, alice.ID, clock.now(), stale.SecurityVersion); !errors.Is(err, identity.ErrInactive) {
			t.Fatal("a session from a login that read the user before the disable")
		}

		// A token of an earlier release (jti without the issue time) is
		// judged by its iat second: refused when that second is not after
		// the mark.
		legacy := func(iat time.Time) string {
			s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, identity.Claims{Username: "alice", Roles: []string{}, RegisteredClaims: jwt.RegisteredClaims{
				Subject: strconv.Itoa(alice.ID), IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(iat.Add(time.Hour)), ID: "legacyjti",
			}}).SignedString(testKey())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		if _, err := ts.Verify(ctx, legacy(clock.now())); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("a legacy token from the second of the mark: %v", err)
		}
		clock.add(2 * time.Second)
		if _, err := ts.Verify(ctx, legacy(clock.now())); err != nil {
			t.Fatalf("a legacy token from a later second: %v", err)
		}

		// setUserPassword: the rules of Create; the new password signs in,
		// the old does not; earlier tokens are refused.
		if _, err := users.SetPassword(ctx, alice.ID, "short"); errs.KindOf(err) != errs.Validation || errs.Field(err) != "password" {
			t.Fatalf("short password: %v", err)
		}
		clock.add(time.Millisecond)
		if _, err := users.SetPassword(ctx, alice.ID, "password-2"); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.Verify(ctx, after); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("a token from before the new password: %v", err)
		}
		if _, err := users.Authenticate(ctx, "alice", "password-1"); !errors.Is(err, identity.ErrInvalidCredentials) {
			t.Fatalf("the old password: %v", err)
		}
		if _, err := users.Authenticate(ctx, "alice", "password-2"); err != nil {
			t.Fatalf("the new password: %v", err)
		}

		for name, f := range map[string]func() error{
			"disable":  func() error { _, err := users.Disable(ctx, 9999); return err },
			"enable":   func() error { _, err := users.Enable(ctx, 9999); return err },
			"password": func() error { _, err := users.SetPassword(ctx, 9999, "long enough"); return err },
		} {
			if err := f(); !errors.Is(err, identity.ErrNotFound) {
				t.Fatalf("%s of an unknown user: %v", name, err)
			}
		}
		// Without a token service the revocation cannot be complete: refused
		// before anything changes.
		if _, err := identity.NewUsers(db.Client).Disable(ctx, bob.ID); err == nil {
			t.Fatal("Disable without a token service")
		}
		if db.User.GetX(ctx, bob.ID).Status != identity.UserEnabled {
			t.Fatal("bob was disabled by a refused call")
		}
	})
}
