package oauth_test

import (
	"context"
	"testing"
	"time"

	"gatehouse/internal/oauth"
	"gatehouse/internal/testenv"
)

// TestTokensCarryTheSignInVersion: codes and tokens keep the user's
// security version of the sign-in they come from. Once the user's version
// has moved on (a disable or a new password raises it in its transaction),
// a code or a pair from before is refused at every use — exchange,
// userinfo, introspection, refresh — even where the change's bulk update
// of codes and tokens did not reach it (here: the version alone is
// raised, as for a row inserted after that update ran); a sign-in that
// read the old version gets no code. A pair from a sign-in after the
// change works.
func TestTokensCarryTheSignInVersion(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		ctx := context.Background()
		c := f.client(t)
		pair, err := f.svc.ExchangeCode(ctx, c, f.code(t, oauth.AuthorizeRequest{Scope: "profile"}), redirect, "")
		if err != nil {
			t.Fatal(err)
		}
		unused := f.code(t, oauth.AuthorizeRequest{Scope: "profile"})
		p, err := f.svc.Authorize(ctx, oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect})
		if err != nil {
			t.Fatal(err)
		}
		signedIn := f.clock.now()
		f.clock.add(time.Second)

		f.db.User.UpdateOneID(f.user.ID).AddSecurityVersion(1).ExecX(ctx)

		if _, err := f.svc.AccessToken(ctx, pair.AccessToken); !oauth.IsCode(err, oauth.CodeInvalidToken) {
			t.Errorf("userinfo with a pair of the old version: %v", err)
		}
		if _, live, err := f.svc.Introspect(ctx, c, pair.RefreshToken); err != nil || live {
			t.Errorf("introspection of a refresh token of the old version: live %v, %v", live, err)
		}
		if _, err := f.svc.Refresh(ctx, c, pair.RefreshToken, ""); !oauth.IsCode(err, oauth.CodeInvalidGrant) {
			t.Errorf("refresh with a token of the old version: %v", err)
		}
		if _, err := f.svc.ExchangeCode(ctx, c, unused, redirect, ""); !oauth.IsCode(err, oauth.CodeInvalidGrant) {
			t.Errorf("exchange of a code of the old version: %v", err)
		}
		if _, err := f.svc.IssueCode(ctx, p, f.user.ID, signedIn, 0); !oauth.IsCode(err, oauth.CodeInvalidGrant) {
			t.Errorf("a code for a sign-in that read the old version: %v", err)
		}

		fresh, err := f.svc.ExchangeCode(ctx, c, f.code(t, oauth.AuthorizeRequest{Scope: "profile"}), redirect, "")
		if err != nil {
			t.Fatalf("a sign-in after the change: %v", err)
		}
		if _, err := f.svc.AccessToken(ctx, fresh.AccessToken); err != nil {
			t.Fatalf("userinfo after the change: %v", err)
		}
		again, err := f.svc.Refresh(ctx, c, fresh.RefreshToken, "")
		if err != nil {
			t.Fatalf("refresh after the change: %v", err)
		}
		if _, err := f.svc.AccessToken(ctx, again.AccessToken); err != nil {
			t.Fatalf("a refreshed pair keeps the sign-in's version: %v", err)
		}
	})
}
