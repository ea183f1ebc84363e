package signin_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/browser"
)

// TestOAuthBrowser drives the login and approval pages in headless
// Chromium: sign in, click Approve and land on the client's redirect URI
// with a code; then click Deny and land with error=access_denied.
func TestOAuthBrowser(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		ctx := browser.New(t)

		id := func(s string) chromedp.ID { return chromedp.ID(s) }
		text := func(sel string) string {
			t.Helper()
			v, err := chromedp.Run(ctx, chromedp.Text(id(sel)))
			if err != nil {
				t.Fatalf("text of #%s: %v", sel, err)
			}
			return v
		}
		location := func() string {
			t.Helper()
			v, err := chromedp.Run(ctx, chromedp.Location())
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		err := chromedp.Do(ctx,
			chromedp.Navigate(f.authorizeURL(url.Values{"scope": {"orders:read profile"}, "state": {"browser-approve"}})),
			chromedp.WaitVisible(id("username")),
			chromedp.SendKeys(id("username"), "alice"),
			chromedp.SendKeys(id("password"), f.password),
			chromedp.Click(id("sign-in")),
			chromedp.WaitVisible(id("approve")),
		)
		if err != nil {
			t.Fatalf("sign in: %v", err)
		}
		appName, scopes, user := text("app-name"), text("scopes"), text("username")
		if err := chromedp.Do(ctx, chromedp.Click(id("approve")), chromedp.WaitVisible(id("done"))); err != nil {
			t.Fatalf("approve: %v", err)
		}
		loc := location()
		if appName != `Acme <Partner> & "Co"` || !strings.Contains(scopes, "orders:read") || !strings.Contains(scopes, "profile") || user != "alice" {
			t.Fatalf("approval page showed app %q, scopes %q, user %q", appName, scopes, user)
		}
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.Scheme + "://" + u.Host + u.Path; got != f.redirect {
			t.Fatalf("landed on %s", loc)
		}
		if u.Query().Get("code") == "" || u.Query().Get("state") != "browser-approve" {
			t.Fatalf("approve landed on %s", loc)
		}
		tok := f.exchange(t, u.Query().Get("code"))
		if f.userinfo(t, tok["access_token"].(string)).json(t)["username"] != "alice" {
			t.Fatal("the browser's code does not yield alice's token")
		}

		// Deny, in the same (signed-in) browser: straight to the approval page.
		err = chromedp.Do(ctx,
			chromedp.Navigate(f.authorizeURL(url.Values{"state": {"browser-deny"}})),
			chromedp.WaitVisible(id("deny")),
			chromedp.Click(id("deny")),
			chromedp.WaitVisible(id("done")),
		)
		if err != nil {
			t.Fatalf("deny flow: %v", err)
		}
		loc = location()
		u, err = url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		if q := u.Query(); q.Get("error") != "access_denied" || q.Get("state") != "browser-deny" || q.Has("code") {
			t.Fatalf("deny landed on %s", loc)
		}
		if got := f.callback.queries(); len(got) != 2 {
			t.Fatalf("the client's callback saw %d requests, want 2", len(got))
		}
	})
}
