package demo

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"gatehouse/internal/identity"
	"gatehouse/internal/partner"
)

func init() { register(40, seedAuth) }

// The demo user. The demo partner app is the OAuth client; its redirect
// URI is the callback page of the demo receiver (DemoRedirectURI), which
// shows the code and the command that exchanges it.
const (
	DemoUsername = "demo"
	DemoPassword = "demo-password-local-only"
	demoScope    = "orders:read"
)

// DemoUserPassword returns the demo user's password for this
// configuration: a documented constant in embedded mode (make run), else
// derived from the master key, so a demo seeded into a shared database
// does not carry a published password.
func DemoUserPassword(e Env) string {
	if e.App.Cfg.Embedded() {
		return DemoPassword
	}
	return "demo-" + hex.EncodeToString(derived(e, "gatehouse demo user password"))[:24]
}

func seedAuth(ctx context.Context, e Env, b *strings.Builder) error {
	a := e.App
	pw := DemoUserPassword(e)
	if _, err := a.Users.Create(ctx, identity.NewUser{Username: DemoUsername, Password: pw, Roles: []string{"viewer"}}); err != nil && !errors.Is(err, identity.ErrConflict) {
		return fmt.Errorf("demo user: %w", err)
	}
	_, err := a.Users.Authenticate(ctx, DemoUsername, pw)
	if err != nil && !errors.Is(err, identity.ErrInvalidCredentials) {
		return fmt.Errorf("demo user: %w", err)
	}
	samePassword := err == nil

	// The demo partner app (section 20) is the OAuth client.
	app, err := a.Partners.GetByKey(ctx, DemoAppKey)
	if err != nil {
		return fmt.Errorf("demo OAuth client: %w", err)
	}
	redirect := DemoRedirectURI(e)
	if !slices.Contains(app.RedirectURIs, redirect) {
		uris := append(slices.Clone(app.RedirectURIs), redirect)
		scopes := app.Scopes
		if !slices.Contains(scopes, demoScope) {
			scopes = append(slices.Clone(scopes), demoScope)
		}
		if _, err := a.Partners.Update(ctx, app.ID, partner.UpdateInput{RedirectURIs: &uris, Scopes: &scopes}); err != nil {
			return fmt.Errorf("demo OAuth client: %w", err)
		}
	}
	sec, err := liveSecret(ctx, e)
	if err != nil {
		return err
	}
	pub := e.PublicURL

	fmt.Fprintf(b, "# Users: signed user token (JWT) login; see docs/auth.md\n")
	fmt.Fprintf(b, "username: %s\n", DemoUsername)
	fmt.Fprintf(b, "password: %s\n", pw)
	if !samePassword {
		fmt.Fprintf(b, "          (the demo user's password was changed or the account disabled since: this one no longer works)\n")
	}
	fmt.Fprintf(b, "TOKEN=$(curl -s -X POST %s/api/auth/login -H 'Content-Type: application/json' -d '{\"username\":\"%s\",\"password\":\"%s\"}' | sed -E 's/.*\"access_token\":\"([^\"]+)\".*/\\1/')\n", pub, DemoUsername, pw)
	fmt.Fprintf(b, "curl -s %s/api/auth/me -H \"Authorization: Bearer $TOKEN\"\n", pub)
	fmt.Fprintf(b, "curl -s -X POST %s/auth/logout -H \"Authorization: Bearer $TOKEN\"\n", pub)
	fmt.Fprintf(b, "curl -s %s/api/auth/me -H \"Authorization: Bearer $TOKEN\"   # 401 invalid_token: logged out\n", pub)

	q := url.Values{"client_id": {DemoAppKey}, "redirect_uri": {redirect}, "response_type": {"code"}, "scope": {demoScope}, "state": {"demo-state"}}
	fmt.Fprintf(b, "\n# OAuth authorization code: start the demo receiver first (the webhook listen command under Webhooks below),\n")
	fmt.Fprintf(b, "# then open this in a browser, sign in as %s, click Approve:\n", DemoUsername)
	fmt.Fprintf(b, "%s/oauth/authorize?%s\n", pub, q.Encode())
	fmt.Fprintf(b, "# the browser lands on the receiver's page %s, which shows the code and these commands with it filled in:\n", redirect)
	fmt.Fprintf(b, "CODE=paste-the-code-here\n")
	fmt.Fprintf(b, "ACCESS=$(curl -s -X POST %s/oauth/token -u '%s:%s' -d grant_type=authorization_code -d \"code=$CODE\" --data-urlencode 'redirect_uri=%s' | sed -E 's/.*\"access_token\":\"([^\"]+)\".*/\\1/')\n", pub, DemoAppKey, sec, redirect)
	fmt.Fprintf(b, "curl -s %s/oauth/userinfo -H \"Authorization: Bearer $ACCESS\"\n", pub)
	return nil
}
