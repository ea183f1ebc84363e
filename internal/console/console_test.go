package console_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

const hostileApp = `Acme <script>alert("app")</script>`

// consolePages are every page a signed-in key can open.
var consolePages = []string{"/console/deliveries", "/console/endpoints", "/console/apps", "/console/keys",
	"/console/users", "/console/audit", "/console/versions", "/console/events", "/console/deliveries/recover"}

// TestConsoleSessionAndCSRF: signing in sets an HttpOnly, SameSite=Strict
// cookie scoped to /console/; a POST without the CSRF token (or with a
// wrong one, or from another origin) is refused and changes nothing; the
// same POST with the token resends; sign-out ends the session on the
// server (the old cookie no longer opens a page).
func TestConsoleSessionAndCSRF(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, "shop")
		c := newClient(t, f)
		if p := c.get("/console/deliveries"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/sign-in" {
			t.Fatalf("signed out: %d %s", p.status, p.header.Get("Location"))
		}
		// A wrong key is refused with the label still there.
		p := c.get("/console/sign-in")
		if r := c.do("POST", "/console/sign-in", url.Values{"api_key": {"gh_wrong"}, "csrf": {p.csrf(t)}}); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "unknown or disabled") {
			t.Fatalf("wrong key: %d %s", r.status, r.body)
		}
		// Sign-in itself needs the token (no login CSRF).
		if r := c.do("POST", "/console/sign-in", url.Values{"api_key": {f.admin}}); r.status != http.StatusForbidden {
			t.Fatalf("sign-in without token: %d", r.status)
		}
		before := c.get("/console/sign-in").csrf(t)
		home := c.signIn(f.admin)
		ck := c.cookie()
		if ck == nil {
			t.Fatal("no console cookie")
		}
		token := home.csrf(t)
		if token == before {
			t.Fatal("the CSRF token did not change at sign-in")
		}
		resend := "/console/deliveries/" + strconv.Itoa(f.failed.ID) + "/resend"
		for name, form := range map[string]url.Values{"no token": {}, "wrong token": {"csrf": {token + "x"}}} {
			if r := c.do("POST", resend, form); r.status != http.StatusForbidden {
				t.Fatalf("%s: %d %s", name, r.status, r.body)
			}
		}
		if r := c.do("POST", resend, url.Values{"csrf": {token}}, "Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden {
			t.Fatalf("cross-site with token: %d", r.status)
		}
		if s := f.status(t, f.failed.ID); s != webhookdelivery.StatusFAILED {
			t.Fatalf("a refused resend changed the delivery to %s", s)
		}
		if r := c.do("POST", resend, url.Values{"csrf": {token}}); r.status != http.StatusSeeOther {
			t.Fatalf("resend with token: %d %s", r.status, r.body)
		}
		if s := f.status(t, f.failed.ID); s == webhookdelivery.StatusFAILED {
			t.Fatal("resend with token did nothing")
		}
		// Sign out; the old cookie opens nothing any more.
		if r := c.do("POST", "/console/sign-out", url.Values{"csrf": {token}}); r.status != http.StatusSeeOther {
			t.Fatalf("sign-out: %d", r.status)
		}
		replay := newClient(t, f)
		u, _ := url.Parse(f.env.AdminURL + "/console/")
		replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/console/"}})
		if r := replay.get("/console/deliveries"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/sign-in" {
			t.Fatalf("old cookie after sign-out: %d %s", r.status, r.header.Get("Location"))
		}
	})
}

// TestConsoleSignInStoresNothing: the pages anyone who reaches the admin
// listener may fetch (the sign-in page, a wrong key's answer, an unknown
// page) make no session: scs sets its cookie whenever it stores one, and
// none is set, so fetching them in a loop fills no session store (Redis,
// or this process). The sign-in form's token lives in a cookie of its own
// (HttpOnly, SameSite=Strict, /console/): another browser's token is
// refused, and the cookie is deleted once signed in.
func TestConsoleSignInStoresNothing(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, "shop")
		sessionSet := func(p page) bool {
			for _, v := range p.header.Values("Set-Cookie") {
				if strings.HasPrefix(v, "gatehouse_console=") {
					return true
				}
			}
			return false
		}
		for i := range 20 {
			c := newClient(t, f)
			p := c.get("/console/sign-in")
			if p.status != http.StatusOK || sessionSet(p) {
				t.Fatalf("sign-in page %d: %d, Set-Cookie %q", i, p.status, p.header.Values("Set-Cookie"))
			}
			form := p.header.Get("Set-Cookie")
			for _, want := range []string{"gatehouse_console_form=", "HttpOnly", "SameSite=Strict", "Path=/console/"} {
				if !strings.Contains(form, want) {
					t.Fatalf("form cookie %q lacks %s", form, want)
				}
			}
			if r := c.do("POST", "/console/sign-in", url.Values{"api_key": {"gh_wrong"}, "csrf": {p.csrf(t)}}); r.status != http.StatusUnauthorized || sessionSet(r) {
				t.Fatalf("wrong key: %d, Set-Cookie %q", r.status, r.header.Values("Set-Cookie"))
			}
			if r := c.get("/console/no-such-page"); r.status != http.StatusNotFound || len(r.header.Values("Set-Cookie")) != 0 {
				t.Fatalf("unknown page: %d, Set-Cookie %q", r.status, r.header.Values("Set-Cookie"))
			}
		}
		// Another browser's token does not pass for this one's.
		mine, theirs := newClient(t, f), newClient(t, f)
		mine.get("/console/sign-in")
		other := theirs.get("/console/sign-in").csrf(t)
		if r := mine.do("POST", "/console/sign-in", url.Values{"api_key": {f.admin}, "csrf": {other}}); r.status != http.StatusForbidden || sessionSet(r) {
			t.Fatalf("another browser's token: %d", r.status)
		}
		// Signed in: a session, and the form cookie is gone.
		mine.signIn(f.admin)
		if mine.cookie() == nil {
			t.Fatal("no session after sign-in")
		}
		u, _ := url.Parse(f.env.AdminURL + "/console/")
		for _, k := range mine.c.Jar.Cookies(u) {
			if k.Name == "gatehouse_console_form" {
				t.Fatal("the form cookie outlived the sign-in")
			}
		}
	})
}

// TestConsoleCookieAttributes: the session cookie is HttpOnly,
// SameSite=Strict, scoped to /console/, and the pages carry a strict CSP.
func TestConsoleCookieAttributes(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, "shop")
		c := newClient(t, f)
		p := c.get("/console/sign-in")
		r := c.do("POST", "/console/sign-in", url.Values{"api_key": {f.admin}, "csrf": {p.csrf(t)}})
		var set string
		for _, v := range r.header.Values("Set-Cookie") {
			if strings.HasPrefix(v, "gatehouse_console=") {
				set = v
			}
		}
		for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/console/"} {
			if !strings.Contains(set, want) {
				t.Errorf("cookie %q lacks %s", set, want)
			}
		}
		csp := p.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("CSP %q", csp)
		}
		if p.header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q", p.header.Get("Cache-Control"))
		}
	})
}

// TestConsoleHostileText: an app name, an endpoint description, a payload
// and a response body with markup are shown as text on every page.
func TestConsoleHostileText(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, hostileApp)
		c := newClient(t, f)
		c.signIn(f.admin)
		pages := append([]string{"/console/deliveries/" + strconv.Itoa(f.failed.ID), "/console/endpoints?app=" + strconv.Itoa(f.appID)}, consolePages...)
		for _, path := range pages {
			p := c.get(path)
			if p.status != http.StatusOK {
				t.Fatalf("%s: %d %s", path, p.status, p.body)
			}
			for _, raw := range []string{"<script>alert", "<b>receiver</b>", "<h1>down</h1>"} {
				if strings.Contains(p.body, raw) {
					t.Fatalf("%s renders %q as markup", path, raw)
				}
			}
		}
		detail := c.get("/console/deliveries/" + strconv.Itoa(f.failed.ID)).body
		for _, esc := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;h1&gt;down&lt;/h1&gt;", "Acme &lt;script&gt;"} {
			if !strings.Contains(detail, esc) {
				t.Errorf("the detail page does not show %q as text", esc)
			}
		}
		if ep := c.get("/console/endpoints?app=" + strconv.Itoa(f.appID)).body; !strings.Contains(ep, "billing &lt;b&gt;receiver&lt;/b&gt;") {
			t.Errorf("the endpoint description is not shown as text")
		}
	})
}

// TestConsoleRefusesOtherListenersSession: a session of the public
// listener (the OAuth sign-in's), even one holding what a console session
// holds, opens nothing in the console, under either cookie name.
func TestConsoleRefusesOtherListenersSession(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, "shop")
		// A console session, to copy its contents into a public one.
		c := newClient(t, f)
		c.signIn(f.admin)
		sm := f.env.App.Sessions
		ctx, err := sm.Load(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		// The admin key, sealed as the console seals it: were the stores
		// shared, this session would be signed in.
		sealer, err := secret.NewSealer(f.env.App.Cfg.MasterKey)
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := sealer.Seal([]byte(f.admin))
		if err != nil {
			t.Fatal(err)
		}
		sm.Put(ctx, "console.key", base64.RawStdEncoding.EncodeToString(sealed))
		sm.Put(ctx, "console.name", "console admin")
		sm.Put(ctx, "console.role", "ADMIN")
		sm.Put(ctx, "ui.csrf", "t")
		token, _, err := sm.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"gatehouse_console", sm.Cookie.Name} {
			other := newClient(t, f)
			u, _ := url.Parse(f.env.AdminURL + "/console/")
			other.c.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: token, Path: "/"}})
			if r := other.get("/console/deliveries"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/sign-in" {
				t.Fatalf("public session as %s: %d %s", name, r.status, r.header.Get("Location"))
			}
			resend := "/console/deliveries/" + strconv.Itoa(f.failed.ID) + "/resend"
			if r := other.do("POST", resend, url.Values{"csrf": {"t"}}); r.status < 400 {
				t.Fatalf("public session as %s resent: %d", name, r.status)
			}
		}
		if s := f.status(t, f.failed.ID); s != webhookdelivery.StatusFAILED {
			t.Fatalf("delivery %s", s)
		}
	})
}

// TestConsoleReadOnly: a READ_ONLY key's pages have no action button, and
// a forged action (its own session, a valid CSRF token) is refused by the
// API (403) and changes nothing; the refusal is audited.
func TestConsoleReadOnly(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, "shop")
		c := newClient(t, f)
		c.signIn(f.readOnly)
		pages := append([]string{"/console/deliveries/" + strconv.Itoa(f.failed.ID)}, consolePages...)
		for _, path := range pages {
			p := c.get(path)
			if p.status != http.StatusOK {
				t.Fatalf("%s: %d", path, p.status)
			}
			// Only the search forms (GET) may have buttons: no form that
			// changes anything, no Resend, Cancel, Rotate, Disable.
			main := p.body[strings.Index(p.body, "<main"):]
			for _, action := range []string{`method="post"`, ">Resend<", ">Cancel<", ">Rotate secret<", ">Disable<", ">Enable<", "Recover failed deliveries…<"} {
				if strings.Contains(main, action) {
					t.Fatalf("%s shows a READ_ONLY key %s", path, action)
				}
			}
		}
		token := c.get("/console/deliveries").csrf(t)
		id := strconv.Itoa(f.failed.ID)
		for _, path := range []string{"/console/deliveries/" + id + "/resend", "/console/endpoints/" + strconv.Itoa(f.endpoint) + "/disable"} {
			if r := c.do("POST", path, url.Values{"csrf": {token}, "confirmed": {"yes"}}); r.status != http.StatusForbidden {
				t.Fatalf("forged %s: %d %s", path, r.status, r.body)
			}
		}
		if s := f.status(t, f.failed.ID); s != webhookdelivery.StatusFAILED {
			t.Fatalf("delivery %s after a forged resend", s)
		}
		var audit struct {
			AuditEvents struct {
				Edges []struct {
					Node struct{ Mutation, Outcome, APIKeyName string }
				}
			}
		}
		f.gql(t, `{ auditEvents(where: {mutation: "resendWebhookDelivery"}) { edges { node { mutation outcome apiKeyName } } } }`, nil, &audit)
		if len(audit.AuditEvents.Edges) != 1 || audit.AuditEvents.Edges[0].Node.APIKeyName != "console reader" || audit.AuditEvents.Edges[0].Node.Outcome == "OK" {
			t.Fatalf("audit of the forged resend: %+v", audit)
		}
	})
}

// TestConsoleKeyNeverShown: after a session over every page, the API key
// is in no page, header, URL or log line; and each page weighs under
// 300 KB with its stylesheet.
func TestConsoleKeyNeverShown(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, "shop")
		c := newClient(t, f)
		c.signIn(f.admin)
		css := c.get("/console/static/ui.css")
		if css.status != http.StatusOK {
			t.Fatalf("stylesheet: %d", css.status)
		}
		for _, path := range append([]string{"/console/deliveries/" + strconv.Itoa(f.failed.ID)}, consolePages...) {
			p := c.get(path)
			if n := len(p.body) + len(css.body); n > 300<<10 {
				t.Errorf("%s weighs %d bytes", path, n)
			}
		}
		token := c.get("/console/deliveries").csrf(t)
		c.do("POST", "/console/endpoints/"+strconv.Itoa(f.endpoint)+"/rotate", url.Values{"csrf": {token}, "confirmed": {"yes"}})
		c.do("POST", "/console/sign-out", url.Values{"csrf": {token}})
		for where, text := range map[string]string{"pages, headers and URLs": c.seen.String(), "log": f.env.Logs.String()} {
			if strings.Contains(text, f.admin) {
				t.Fatalf("the API key appears in the %s", where)
			}
		}
		if !strings.Contains(f.env.Logs.String(), "/console/deliveries") {
			t.Fatal("the log has no console request: the check above looked at nothing")
		}
	})
}
