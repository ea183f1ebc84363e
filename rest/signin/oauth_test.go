package signin_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// TestOAuthAuthorize: validation before any redirect, then login, then
// the approval page.
func TestOAuthAuthorize(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		c := auBrowser(t)
		get := func(q url.Values) auResp { return auDo(t, c, "GET", f.authorizeURL(q), nil) }

		// Not redirected anywhere: unknown client, bad redirect URI.
		for name, q := range map[string]url.Values{
			"unknown client": {"client_id": {"nope"}},
			"no client":      {"client_id": {""}},
		} {
			r := get(q).expectError(t, 400, "invalid_client")
			if r.header.Get("Location") != "" {
				t.Fatalf("%s: redirected to %s", name, r.header.Get("Location"))
			}
		}
		for name, q := range map[string]url.Values{
			"unregistered redirect": {"redirect_uri": {"https://evil.example/callback"}},
			"redirect prefix":       {"redirect_uri": {f.redirect + "/x"}},
			"redirect extra query":  {"redirect_uri": {f.redirect + "?a=1"}},
			"no redirect":           {"redirect_uri": {""}},
			"client_id twice":       {"client_id": {f.app.AppKey, f.app.AppKey}},
			"redirect_uri twice":    {"redirect_uri": {f.redirect, "https://evil.example/callback"}},
			"state twice":           {"state": {"a", "b"}},
			"code_challenge twice":  {"code_challenge": {"a", "b"}},
			"javascript redirect":   {"redirect_uri": {"javascript:alert(1)"}},
		} {
			r := get(q).expectError(t, 400, "invalid_request")
			if r.header.Get("Location") != "" {
				t.Fatalf("%s: redirected to %s", name, r.header.Get("Location"))
			}
		}
		// Errors after the redirect URI is trusted go back to the client.
		for name, c := range map[string]struct {
			q    url.Values
			code string
		}{
			"response_type token": {url.Values{"response_type": {"token"}}, "unsupported_response_type"},
			"scope not allowed":   {url.Values{"scope": {"profile admin"}}, "invalid_scope"},
			"PKCE plain":          {url.Values{"code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"plain"}}, "invalid_request"},
		} {
			loc := get(c.q).location(t)
			if got := loc.Scheme + "://" + loc.Host + loc.Path; got != f.redirect {
				t.Fatalf("%s: redirected to %s", name, loc)
			}
			if loc.Query().Get("error") != c.code || loc.Query().Get("state") != "st-123" || loc.Query().Get("code") != "" {
				t.Fatalf("%s: %s", name, loc)
			}
		}
		// A valid request: to the login page, the request in a sealed
		// cookie of its own (no session for a stranger).
		r := get(nil)
		loc := r.location(t)
		if r.status != 302 || loc.Path != "/login" {
			t.Fatalf("valid request: HTTP %d to %s", r.status, loc)
		}
		id := requestID(t, loc)
		next := loc.Query().Get("next")
		cookie := r.header.Get("Set-Cookie")
		if !strings.HasPrefix(cookie, "gatehouse_oauth_"+id+"=") || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Lax") ||
			!strings.Contains(cookie, "Max-Age=600") || strings.Contains(cookie, f.redirect) || strings.Contains(cookie, "st-123") {
			t.Fatalf("pending request cookie %q", cookie)
		}
		if len(r.header.Values("Set-Cookie")) != 1 {
			t.Fatalf("cookies %v", r.header.Values("Set-Cookie"))
		}

		// The approval page needs a signed-in user.
		if loc := auDo(t, c, "GET", f.PublicURL+"/oauth/approve?request_id="+id, nil).location(t); loc.Path != "/login" || requestID(t, loc) != id {
			t.Fatalf("approve before login went to %s", loc)
		}
		// The login page: a real form, every value escaped.
		r = auDo(t, c, "GET", f.PublicURL+"/login?next="+url.QueryEscape(next), nil)
		page := string(r.body)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(page, `<form method="post" action="/login"`) || !strings.Contains(page, `name="password"`) ||
			!strings.Contains(page, `value="/oauth/approve?request_id=`+id+`"`) {
			t.Fatalf("login page: HTTP %d\n%s", r.status, page)
		}
		if strings.Contains(page, "<Partner>") || !strings.Contains(page, "Acme &lt;Partner&gt; &amp; &#34;Co&#34;") {
			t.Fatalf("app name not escaped:\n%s", page)
		}
		r = f.signIn(t, c, "alice", "wrong password", next)
		if r.status != 401 || !strings.Contains(string(r.body), "Wrong username or password") || !strings.Contains(string(r.body), `value="alice"`) {
			t.Fatalf("wrong password: HTTP %d\n%s", r.status, r.body)
		}
		// Escaping of what the user typed.
		r = f.signIn(t, c, `"><script>alert(1)</script>`, "x", next)
		if strings.Contains(string(r.body), "<script>alert(1)") {
			t.Fatalf("username echoed unescaped:\n%s", r.body)
		}
		if sessionCookie(t, c, f.PublicURL) != "" {
			t.Fatal("a session was created before sign-in")
		}
		r = f.signIn(t, c, "alice", f.password, next)
		if loc := r.location(t); loc.Path != "/oauth/approve" || requestID(t, loc) != id {
			t.Fatalf("login went to %s", loc)
		}
		if !strings.Contains(strings.Join(r.header.Values("Set-Cookie"), "\n"), "gatehouse_oauth_"+id+"=; Path=/; Max-Age=0") {
			t.Fatalf("the pending cookie was not cleared at login: %v", r.header.Values("Set-Cookie"))
		}
		before := sessionCookie(t, c, f.PublicURL)
		if before == "" {
			t.Fatal("no session after login")
		}
		// Signing in again renews the session token (fixation).
		f.signIn(t, c, "alice", f.password, next)
		if after := sessionCookie(t, c, f.PublicURL); after == "" || after == before {
			t.Fatal("the session token was not renewed at login")
		}
		// The approval page.
		r = auDo(t, c, "GET", f.PublicURL+"/oauth/approve?request_id="+id, nil)
		page = string(r.body)
		for _, want := range []string{"Acme &lt;Partner&gt; &amp; &#34;Co&#34;", "<code>profile</code>", ">alice<", `id="approve"`, `id="deny"`, `action="/oauth/confirm"`,
			`name="request_id" value="` + id + `"`} {
			if !strings.Contains(page, want) {
				t.Fatalf("approval page lacks %q:\n%s", want, page)
			}
		}
		if r.header.Get("X-Frame-Options") != "DENY" || !strings.Contains(r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("approval page headers %v", r.header)
		}
		// Signed in: authorize goes straight to the approval page of a
		// new request; the first one's page still shows the first.
		loc = get(url.Values{"scope": {"orders:read profile"}}).location(t)
		id2 := requestID(t, loc)
		if loc.Path != "/oauth/approve" || id2 == id {
			t.Fatalf("signed-in authorize went to %s", loc)
		}
		page = string(auDo(t, c, "GET", f.PublicURL+"/oauth/approve?request_id="+id2, nil).body)
		if !strings.Contains(page, "<code>orders:read</code>") {
			t.Fatalf("the second request is not the one shown:\n%s", page)
		}
		if page := string(auDo(t, c, "GET", f.PublicURL+"/oauth/approve?request_id="+id, nil).body); strings.Contains(page, "<code>orders:read</code>") {
			t.Fatalf("the first request's page changed:\n%s", page)
		}
		// No id, or an unknown one.
		auDo(t, c, "GET", f.PublicURL+"/oauth/approve", nil).expectError(t, 400, "invalid_request")
		auDo(t, c, "GET", f.PublicURL+"/oauth/approve?request_id=nope", nil).expectError(t, 400, "invalid_request")
		// A user disabled since signing in is signed out.
		if _, err := f.App.DB.User.UpdateOneID(f.user.ID).SetStatus(0).Save(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := auDo(t, c, "GET", f.PublicURL+"/oauth/approve?request_id="+id, nil); r.status != 400 || r.header.Get("Location") != "" {
			t.Fatalf("a disabled user still sees the approval page (HTTP %d)", r.status)
		}
	})
}

func sessionCookie(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "gatehouse_session" {
			return ck.Value
		}
	}
	return ""
}

// TestOAuthLoginNext: only local targets after login; no open redirect.
func TestOAuthLoginNext(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		for next, want := range map[string]string{
			"/oauth/approve?request_id=x": "/oauth/approve?request_id=x",
			"/login?x=1":                  "/login?x=1",
			"":                            "/login",
			"https://evil.example/":       "/login",
			"//evil.example/":             "/login",
			"/\\evil.example/":            "/login",
			"\\\\evil.example":            "/login",
			"/\t/evil.example":            "/login",
			"javascript:alert(1)":         "/login",
			"http:/evil.example":          "/login",
			"/%2F%2Fevil.example":         "/%2F%2Fevil.example",
			"evil.example":                "/login",
			"https://" + f.PublicURL[7:]:  "/login",
		} {
			c := auBrowser(t)
			r := f.signIn(t, c, "alice", f.password, next)
			if r.status != 302 || r.header.Get("Location") != want {
				t.Errorf("next=%q: HTTP %d to %q, want %q", next, r.status, r.header.Get("Location"), want)
			}
		}
		// With a pending request and no next, the approval page is next.
		c := auBrowser(t)
		id := f.authorize(t, c, nil)
		if r := f.signIn(t, c, "alice", f.password, ""); r.header.Get("Location") != "/oauth/approve?request_id="+id {
			t.Fatalf("default next with a pending request: %q", r.header.Get("Location"))
		}
		// Signed in, the login page says so.
		if page := string(auDo(t, c, "GET", f.PublicURL+"/login", nil).body); !strings.Contains(page, "signed in as <strong>alice</strong>") {
			t.Fatalf("login page of a signed-in user:\n%s", page)
		}
	})
}

// TestOAuthConfirm: approve → code and state; deny → access_denied and
// state; without a signed-in session holding a pending request → 400
// invalid_request.
func TestOAuthConfirm(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		confirmURL := f.PublicURL + "/oauth/confirm"

		// No session at all.
		auForm(t, auBrowser(t), confirmURL, url.Values{"approved": {"true"}}).expectError(t, 400, "invalid_request")
		auJSON(t, auBrowser(t), confirmURL, `{"approved":true}`).expectError(t, 400, "invalid_request")
		// A pending request, nobody signed in.
		c := auBrowser(t)
		id := f.authorize(t, c, nil)
		f.confirm(t, c, id, true).expectError(t, 400, "invalid_request")
		// Signed in, no pending request.
		c = auBrowser(t)
		f.signIn(t, c, "alice", f.password, "")
		f.confirm(t, c, id, true).expectError(t, 400, "invalid_request")
		auDo(t, c, "GET", f.PublicURL+"/oauth/approve?request_id="+id, nil).expectError(t, 400, "invalid_request")

		// Signed in with a pending request: bad "approved" or request_id values.
		id = f.authorize(t, c, nil)
		for name, form := range map[string]url.Values{
			"missing":       {"request_id": {id}},
			"maybe":         {"approved": {"maybe"}, "request_id": {id}},
			"twice":         {"approved": {"true", "false"}, "request_id": {id}},
			"no request_id": {"approved": {"true"}},
			"empty id":      {"approved": {"true"}, "request_id": {""}},
			"unknown id":    {"approved": {"true"}, "request_id": {"AAAAAAAAAAAAAAAAAAAAAA"}},
			"id twice":      {"approved": {"true"}, "request_id": {id, id}},
		} {
			t.Run(name, func(t *testing.T) { auForm(t, c, confirmURL, form).expectError(t, 400, "invalid_request") })
		}
		auJSON(t, c, confirmURL, `{"approved":"perhaps","request_id":"`+id+`"}`).expectError(t, 400, "invalid_request")
		auJSON(t, c, confirmURL, `{"approved":1,"request_id":"`+id+`"}`).expectError(t, 400, "invalid_request")
		auJSON(t, c, confirmURL, `{"request_id":"`+id+`"}`).expectError(t, 400, "invalid_request")
		auJSON(t, c, confirmURL, `{"approved":true}`).expectError(t, 400, "invalid_request")
		auJSON(t, c, confirmURL, `{"approved":true,"request_id":7}`).expectError(t, 400, "invalid_request")

		// Deny.
		loc := f.confirm(t, c, id, false).location(t)
		if got := loc.Scheme + "://" + loc.Host + loc.Path; got != f.redirect {
			t.Fatalf("deny redirected to %s", loc)
		}
		if q := loc.Query(); q.Get("error") != "access_denied" || q.Get("state") != "st-123" || q.Has("code") {
			t.Fatalf("deny: %s", loc)
		}
		// The decision is taken once.
		f.confirm(t, c, id, true).expectError(t, 400, "invalid_request")

		// Approve with JSON, no state, a redirect URI that has a query.
		withQuery := f.redirect + "?tenant=7"
		uris := []string{f.redirect, withQuery}
		if _, err := f.App.Partners.Update(context.Background(), f.app.ID, partner.UpdateInput{RedirectURIs: &uris}); err != nil {
			t.Fatal(err)
		}
		id = f.authorize(t, c, url.Values{"redirect_uri": {withQuery}, "state": {""}})
		r := auJSON(t, c, confirmURL, `{"approved":true,"request_id":"`+id+`"}`)
		if r.status != 302 {
			t.Fatalf("approve: HTTP %d %s", r.status, r.body)
		}
		loc = r.location(t)
		if q := loc.Query(); q.Get("tenant") != "7" || q.Get("code") == "" || q.Has("state") || !strings.HasPrefix(loc.String(), withQuery+"&") {
			t.Fatalf("approve: %s", loc)
		}
		tok := f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {withQuery}})
		if tok.status != 200 {
			t.Fatalf("exchange: %d %s", tok.status, tok.body)
		}

		// Another user's pending request: bob signs in on a browser where
		// alice left one; it is not his to approve.
		auUser(t, f.Env, "bob", "bob password")
		id = f.authorize(t, c, nil)
		f.signIn(t, c, "bob", "bob password", "")
		f.confirm(t, c, id, true).expectError(t, 400, "invalid_request")
		// Nor can he approve it from his own browser with alice's id.
		cb := auBrowser(t)
		f.signIn(t, cb, "bob", "bob password", "")
		f.signIn(t, c, "alice", f.password, "")
		id = f.authorize(t, c, nil)
		f.confirm(t, cb, id, true).expectError(t, 400, "invalid_request")
		if f.confirm(t, c, id, true).location(t).Query().Get("code") == "" {
			t.Fatal("alice could not approve her own request")
		}

		// The pending request expires (10 minutes): in the session, and in
		// the sealed cookie of a browser that is not signed in yet.
		c = auBrowser(t)
		id = f.authorize(t, c, nil)
		f.signIn(t, c, "alice", f.password, "")
		setRESTClock(f, time.Now().Add(11*time.Minute))
		f.confirm(t, c, id, true).expectError(t, 400, "invalid_request")
		setRESTClock(f, time.Time{})
		c = auBrowser(t)
		id = f.authorize(t, c, nil)
		setRESTClock(f, time.Now().Add(11*time.Minute))
		if loc := f.signIn(t, c, "alice", f.password, "").location(t); loc.Path != "/login" {
			t.Fatalf("an expired cookie was adopted: %s", loc)
		}
		setRESTClock(f, time.Time{})
		f.confirm(t, c, id, true).expectError(t, 400, "invalid_request")
		setRESTClock(f, time.Time{})
	})
}

// setRESTClock moves the clock the OAuth service and the browser flow
// use; the zero time restores the real clock.
func setRESTClock(f *auFix, at time.Time) {
	if at.IsZero() {
		f.App.OAuth.SetClock(time.Now)
		return
	}
	d := time.Until(at)
	now := func() time.Time { return time.Now().Add(d) }
	f.App.OAuth.SetClock(now)
}

// TestOAuthCrossSite: cross-site POSTs to /login and /oauth/confirm are
// refused with 403 and change nothing.
func TestOAuthCrossSite(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		c := auBrowser(t)
		id := f.authorize(t, c, nil)
		form := url.Values{"username": {"alice"}, "password": {f.password}, "next": {"/oauth/approve?request_id=" + id}}
		for _, h := range [][]string{
			{"Sec-Fetch-Site", "cross-site"},
			{"Sec-Fetch-Site", "same-site"},
			{"Origin", "https://evil.example"},
		} {
			auForm(t, c, f.PublicURL+"/login", form, h...).expectError(t, 403, "forbidden")
		}
		// Refused logins did not sign anyone in.
		f.confirm(t, c, id, true).expectError(t, 400, "invalid_request")
		// Same-origin requests pass.
		if r := auForm(t, c, f.PublicURL+"/login", form, "Sec-Fetch-Site", "same-origin", "Origin", f.PublicURL); r.status != 302 {
			t.Fatalf("same-origin login: HTTP %d %s", r.status, r.body)
		}
		for name, h := range map[string][]string{
			"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site", "cross-site"},
			"foreign Origin":            {"Origin", "https://evil.example"},
		} {
			r := f.confirm(t, c, id, true, h...).expectError(t, 403, "forbidden")
			if r.header.Get("Location") != "" {
				t.Fatalf("%s: redirected", name)
			}
		}
		// The pending request survived the refused posts.
		loc := f.confirm(t, c, id, true, "Sec-Fetch-Site", "same-origin").location(t)
		if loc.Query().Get("code") == "" {
			t.Fatalf("same-origin confirm: %s", loc)
		}
	})
}

// TestOAuthToken covers the token endpoint's statuses and bodies.
func TestOAuthToken(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		tokenURL := f.PublicURL + "/oauth/token"
		code, state := f.code(t, nil)
		if state != "st-123" {
			t.Fatalf("state %q", state)
		}
		authCode := func(code string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {f.redirect}}
		}
		withCreds := func(v url.Values, id, sec string) url.Values {
			v.Set("client_id", id)
			v.Set("client_secret", sec)
			return v
		}
		other, otherSec := apptest.CreateApp(t, f.Env, partner.CreateInput{RedirectURIs: []string{f.redirect}, Scopes: []string{"profile"}})

		f.token(t, url.Values{"code": {code}}).expectError(t, 400, "invalid_request")
		f.token(t, url.Values{"grant_type": {"password"}, "username": {"alice"}, "password": {f.password}}).expectError(t, 400, "unsupported_grant_type")
		f.token(t, url.Values{"grant_type": {"client_credentials"}}).expectError(t, 400, "unsupported_grant_type")
		for name, form := range map[string]url.Values{
			"no credentials": authCode(code),
			"wrong secret":   withCreds(authCode(code), f.app.AppKey, f.secret+"x"),
			"empty secret":   withCreds(authCode(code), f.app.AppKey, ""),
			"unknown client": withCreds(authCode(code), "nope", f.secret),
			"other's secret": withCreds(authCode(code), f.app.AppKey, otherSec),
		} {
			t.Run(name, func(t *testing.T) {
				r := auForm(t, f.Client, tokenURL, form).expectError(t, 401, "invalid_client")
				if r.header.Get("WWW-Authenticate") == "" || r.header.Get("Cache-Control") != "no-store" {
					t.Fatalf("headers %v", r.header)
				}
			})
		}
		r := auForm(t, f.Client, tokenURL, authCode(code), "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(f.app.AppKey+":wrong")))
		r.expectError(t, 401, "invalid_client")
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic") {
			t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
		}
		f.token(t, url.Values{"grant_type": {"authorization_code"}, "redirect_uri": {f.redirect}}).expectError(t, 400, "invalid_request")
		f.token(t, authCode("ghc_unknown")).expectError(t, 400, "invalid_grant")
		f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {f.redirect + "?x"}}).expectError(t, 400, "invalid_grant")
		f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}}).expectError(t, 400, "invalid_grant")
		auForm(t, f.Client, tokenURL, withCreds(authCode(code), other.AppKey, otherSec)).expectError(t, 400, "invalid_grant")
		// Malformed requests.
		auDo(t, f.Client, "POST", tokenURL, strings.NewReader("grant_type=authorization_code"), "Content-Type", "text/plain").expectError(t, 400, "invalid_request")
		auDo(t, f.Client, "POST", tokenURL, strings.NewReader(withCreds(authCode(code), f.app.AppKey, f.secret).Encode()+"&code=again"),
			"Content-Type", "application/x-www-form-urlencoded").expectError(t, 400, "invalid_request")
		auJSON(t, f.Client, tokenURL, `{"grant_type":"authorization_code","code":123}`).expectError(t, 400, "invalid_request")
		auJSON(t, f.Client, tokenURL, `{"grant_type":`).expectError(t, 400, "invalid_request")
		auForm(t, f.Client, tokenURL, withCreds(authCode(code), f.app.AppKey, f.secret),
			"Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(f.app.AppKey+":"+f.secret))).expectError(t, 400, "invalid_request")

		// The exchange itself (the failures above did not use the code up).
		r = f.token(t, authCode(code))
		if r.status != 200 || r.header.Get("Cache-Control") != "no-store" || r.header.Get("Pragma") != "no-cache" {
			t.Fatalf("exchange: HTTP %d %v %s", r.status, r.header, r.body)
		}
		tok := r.json(t)
		if len(tok) != 5 || tok["token_type"] != "Bearer" || tok["expires_in"] != float64(7200) || tok["scope"] != "profile" ||
			tok["access_token"] == "" || tok["refresh_token"] == "" {
			t.Fatalf("token body %s", r.body)
		}
		access := tok["access_token"].(string)
		if r := f.userinfo(t, access); r.status != 200 {
			t.Fatalf("userinfo: %d %s", r.status, r.body)
		}
		// Reuse: invalid_grant, and the tokens from the code are revoked.
		f.token(t, authCode(code)).expectError(t, 400, "invalid_grant")
		f.userinfo(t, access).expectError(t, 401, "invalid_token")
		f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}).expectError(t, 400, "invalid_grant")

		// Expired (10 minutes).
		code, _ = f.code(t, nil)
		setRESTClock(f, time.Now().Add(10*time.Minute+time.Second))
		f.token(t, authCode(code)).expectError(t, 400, "invalid_grant")
		setRESTClock(f, time.Time{})

		// JSON body and HTTP Basic client authentication.
		code, _ = f.code(t, nil)
		r = auJSON(t, f.Client, tokenURL, `{"grant_type":"authorization_code","code":"`+code+`","redirect_uri":"`+f.redirect+`","client_id":"`+f.app.AppKey+`","client_secret":"`+f.secret+`"}`)
		if r.status != 200 {
			t.Fatalf("JSON exchange: %d %s", r.status, r.body)
		}
		code, _ = f.code(t, nil)
		r = auForm(t, f.Client, tokenURL, authCode(code), "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(f.app.AppKey+":"+f.secret)))
		if r.status != 200 {
			t.Fatalf("Basic exchange: %d %s", r.status, r.body)
		}

		// Refresh rotates the pair.
		pair := r.json(t)
		r = f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {pair["refresh_token"].(string)}})
		if r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("refresh: %d %s", r.status, r.body)
		}
		next := r.json(t)
		if next["refresh_token"] == pair["refresh_token"] || next["access_token"] == pair["access_token"] || next["expires_in"] != float64(7200) {
			t.Fatalf("refreshed pair %v", next)
		}
		f.userinfo(t, pair["access_token"].(string)).expectError(t, 401, "invalid_token")
		if r := f.userinfo(t, next["access_token"].(string)); r.status != 200 {
			t.Fatalf("new access token: %d %s", r.status, r.body)
		}
		f.token(t, url.Values{"grant_type": {"refresh_token"}}).expectError(t, 400, "invalid_request")
		f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"ghr_unknown"}}).expectError(t, 400, "invalid_grant")
		f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {next["refresh_token"].(string)}, "scope": {"orders:read"}}).expectError(t, 400, "invalid_scope")

		// PKCE.
		verifier := secret.RandomToken("", 32)
		sum := sha256.Sum256([]byte(verifier))
		code, _ = f.code(t, url.Values{"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}})
		f.token(t, authCode(code)).expectError(t, 400, "invalid_grant")
		wrong := authCode(code)
		wrong.Set("code_verifier", secret.RandomToken("", 32))
		f.token(t, wrong).expectError(t, 400, "invalid_grant")
		right := authCode(code)
		right.Set("code_verifier", verifier)
		if r := f.token(t, right); r.status != 200 {
			t.Fatalf("PKCE exchange: %d %s", r.status, r.body)
		}

		// Concurrent redemptions of one code: exactly one pair.
		code, _ = f.code(t, nil)
		const n = 6
		statuses := make([]int, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		body := withCreds(authCode(code), f.app.AppKey, f.secret).Encode()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resp, err := f.Client.Post(tokenURL, "application/x-www-form-urlencoded", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			}()
		}
		close(start)
		wg.Wait()
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		if count[200] != 1 || count[400] != n-1 {
			t.Fatalf("%d concurrent redemptions: %v", n, count)
		}
		if logs := f.Logs.String(); strings.Contains(logs, f.secret) || strings.Contains(logs, code) || strings.Contains(logs, access) {
			t.Fatal("a secret, code or token reached the logs")
		}
	})
}

// TestOAuthUserinfo covers the bearer side of OAuth.
func TestOAuthUserinfo(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		code, _ := f.code(t, url.Values{"scope": {"orders:read profile"}})
		access := f.exchange(t, code)["access_token"].(string)
		infoURL := f.PublicURL + "/oauth/userinfo"
		for name, h := range map[string][]string{
			"no header":    nil,
			"basic":        {"Authorization", "Basic YTpi"},
			"empty bearer": {"Authorization", "Bearer "},
			"token alone":  {"Authorization", access},
		} {
			r := auDo(t, f.Client, "GET", infoURL, nil, h...).expectError(t, 401, "unauthorized")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s: WWW-Authenticate %q", name, r.header.Get("WWW-Authenticate"))
			}
		}
		jwtTok := f.loginToken(t)
		for name, tok := range map[string]string{"unknown": "gha_unknown", "a login JWT": jwtTok, "the refresh token": "ghr_x"} {
			r := f.userinfo(t, tok).expectError(t, 401, "invalid_token")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(r.header.Get("WWW-Authenticate"), "invalid_token") {
				t.Fatalf("%s: WWW-Authenticate %q", name, r.header.Get("WWW-Authenticate"))
			}
		}
		r := f.userinfo(t, access)
		if r.status != 200 {
			t.Fatalf("userinfo: %d %s", r.status, r.body)
		}
		m := r.json(t)
		if len(m) != 4 || m["sub"] != strconv.Itoa(f.user.ID) || m["username"] != "alice" || m["scope"] != "orders:read profile" || m["client_id"] != f.app.AppKey {
			t.Fatalf("userinfo body %s", r.body)
		}
		if r := auDo(t, f.Client, "POST", infoURL, nil, "Authorization", "Bearer "+access); r.status != 200 {
			t.Fatalf("POST userinfo: %d", r.status)
		}
		// Valid 7200 s.
		setRESTClock(f, time.Now().Add(7199*time.Second))
		if r := f.userinfo(t, access); r.status != 200 {
			t.Fatalf("after 7199 s: %d %s", r.status, r.body)
		}
		setRESTClock(f, time.Now().Add(7201*time.Second))
		f.userinfo(t, access).expectError(t, 401, "invalid_token")
		setRESTClock(f, time.Time{})
		// A disabled app's tokens stop working.
		disabled := partner.Disabled
		if _, err := f.App.Partners.Update(context.Background(), f.app.ID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		f.userinfo(t, access).expectError(t, 401, "invalid_token")
	})
}

// TestOAuthRevokeIntrospect: RFC 7009 and RFC 7662, client-authenticated.
func TestOAuthRevokeIntrospect(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		code, _ := f.code(t, nil)
		pair := f.exchange(t, code)
		access, refresh := pair["access_token"].(string), pair["refresh_token"].(string)
		other, otherSec := apptest.CreateApp(t, f.Env, partner.CreateInput{})
		post := func(path string, form url.Values, id, sec string) auResp {
			if id != "" {
				form.Set("client_id", id)
				form.Set("client_secret", sec)
			}
			return auForm(t, f.Client, f.PublicURL+path, form)
		}
		for _, path := range []string{"/oauth/revoke", "/oauth/introspect"} {
			post(path, url.Values{"token": {access}}, "", "").expectError(t, 401, "invalid_client")
			post(path, url.Values{"token": {access}}, f.app.AppKey, "wrong").expectError(t, 401, "invalid_client")
			post(path, url.Values{}, f.app.AppKey, f.secret).expectError(t, 400, "invalid_request")
		}
		r := post("/oauth/introspect", url.Values{"token": {access}}, f.app.AppKey, f.secret)
		m := r.json(t)
		if r.status != 200 || m["active"] != true || m["client_id"] != f.app.AppKey || m["username"] != "alice" ||
			m["scope"] != "profile" || m["token_type"] != "Bearer" || m["sub"] != strconv.Itoa(f.user.ID) || m["exp"] == nil ||
			r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("introspect: %d %s", r.status, r.body)
		}
		if m := post("/oauth/introspect", url.Values{"token": {refresh}, "token_type_hint": {"refresh_token"}}, f.app.AppKey, f.secret).json(t); m["active"] != true {
			t.Fatalf("introspect refresh: %v", m)
		}
		for name, tok := range map[string]string{"unknown": "gha_nope"} {
			if r := post("/oauth/introspect", url.Values{"token": {tok}}, f.app.AppKey, f.secret); string(r.body) != "{\"active\":false}\n" {
				t.Fatalf("%s: %s", name, r.body)
			}
		}
		// Another client learns nothing and revokes nothing.
		if m := post("/oauth/introspect", url.Values{"token": {access}}, other.AppKey, otherSec).json(t); m["active"] != false || len(m) != 1 {
			t.Fatalf("another client's introspection: %v", m)
		}
		if r := post("/oauth/revoke", url.Values{"token": {access}}, other.AppKey, otherSec); r.status != 200 {
			t.Fatalf("revoke by another client: %d", r.status)
		}
		if r := f.userinfo(t, access); r.status != 200 {
			t.Fatalf("another client revoked the token: %d", r.status)
		}
		// Revoking the refresh token ends the pair.
		if r := post("/oauth/revoke", url.Values{"token": {refresh}, "token_type_hint": {"refresh_token"}}, f.app.AppKey, f.secret); r.status != 200 || len(r.body) != 0 {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		f.userinfo(t, access).expectError(t, 401, "invalid_token")
		if m := post("/oauth/introspect", url.Values{"token": {access}}, f.app.AppKey, f.secret).json(t); m["active"] != false {
			t.Fatalf("revoked token active: %v", m)
		}
		if r := post("/oauth/revoke", url.Values{"token": {"whatever"}}, f.app.AppKey, f.secret); r.status != 200 {
			t.Fatalf("revoke of an unknown token: %d", r.status)
		}
		// HTTP Basic works here too.
		code, _ = f.code(t, nil)
		access = f.exchange(t, code)["access_token"].(string)
		r = auForm(t, f.Client, f.PublicURL+"/oauth/revoke", url.Values{"token": {access}}, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(f.app.AppKey+":"+f.secret)))
		if r.status != 200 {
			t.Fatalf("revoke with Basic: %d %s", r.status, r.body)
		}
		f.userinfo(t, access).expectError(t, 401, "invalid_token")
	})
}

// TestOAuthSessionAcrossInstances: the browser flow may hop between
// replicas sharing Postgres and Redis (sessions live in Redis).
func TestOAuthSessionAcrossInstances(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("in-process sessions are per instance by design (one replica); shared sessions need Redis")
		}
		keys := auSharedKeys()
		f1 := auSetup(t, b, keys)
		e2 := apptest.Start(t, b, keys)
		c := auBrowser(t) // cookies are per host, not per port: both instances see the session
		id := f1.authorize(t, c, nil)
		next := "/oauth/approve?request_id=" + id
		if loc := auForm(t, c, e2.PublicURL+"/login", url.Values{"username": {"alice"}, "password": {f1.password}, "next": {next}}).location(t); loc.String() != next {
			t.Fatalf("login on instance 2: %s", loc)
		}
		if r := auDo(t, c, "GET", e2.PublicURL+next, nil); r.status != 200 {
			t.Fatalf("approve page on instance 2: %d %s", r.status, r.body)
		}
		loc := auForm(t, c, f1.PublicURL+"/oauth/confirm", url.Values{"approved": {"true"}, "request_id": {id}}).location(t)
		r := auForm(t, e2.Client, e2.PublicURL+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
			"redirect_uri": {f1.redirect}, "client_id": {f1.app.AppKey}, "client_secret": {f1.secret}})
		if r.status != 200 {
			t.Fatalf("exchange on instance 2: %d %s", r.status, r.body)
		}
	})
}
