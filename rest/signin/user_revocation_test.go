package signin_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/testenv"
)

// adminCall runs a GraphQL operation on e's admin listener with key and
// returns the data of field, failing on any error.
func adminCall(t *testing.T, e *apptest.Env, key, query, field string, vars map[string]any) map[string]any {
	t.Helper()
	code, data := adminTry(t, e, key, query, vars)
	if code != "" {
		t.Fatalf("%s: error %s", field, code)
	}
	m, _ := data[field].(map[string]any)
	return m
}

// adminTry runs a GraphQL operation and returns the first error's code
// ("" when none) and the data.
func adminTry(t *testing.T, e *apptest.Env, key, query string, vars map[string]any) (string, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	r := e.Do(t, "POST", e.AdminURL+"/graphql", string(body), "Content-Type", "application/json", "X-API-Key", key)
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("graphql: HTTP %d %s", r.Status, r.Body)
	}
	if len(out.Errors) > 0 {
		c, _ := out.Errors[0].Extensions["code"].(string)
		return c, out.Data
	}
	return "", out.Data
}

// revocationFix is alice signed in every way at once: a signed token, an
// OAuth token pair, and an OAuth code not yet exchanged.
type revocationFix struct {
	jwt, access, refresh, code string
}

// signInEverywhere gives alice (password pw) each kind of credential.
func signInEverywhere(t *testing.T, f *auFix, pw string) revocationFix {
	t.Helper()
	r := f.login(t, `{"username":"alice","password":"`+pw+`"}`)
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	var rf revocationFix
	rf.jwt = r.json(t)["access_token"].(string)
	code, _ := f.code(t, nil)
	tok := f.exchange(t, code)
	rf.access, rf.refresh = tok["access_token"].(string), tok["refresh_token"].(string)
	rf.code, _ = f.code(t, nil)
	return rf
}

// TestDisableUserEndsEverySignIn: disableUser (GraphQL) on one replica
// refuses, on the other, the user's login, signed token, OAuth access and
// refresh tokens, an authorization code not yet exchanged, and browser
// session. enableUser lets them sign in again — at once, in the same
// second — but brings none of the old credentials back. setUserPassword
// does the same to everything signed in before it, and the new password
// works. On SQLite (one replica) both sides are the same instance.
func TestDisableUserEndsEverySignIn(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		keys := auSharedKeys()
		f := auSetup(t, b, keys)
		other := f // the replica that checks
		if !b.Embedded() {
			other = &auFix{Env: apptest.Start(t, b, keys), app: f.app, secret: f.secret, redirect: f.redirect, password: f.password, callback: f.callback}
		}
		ctx := context.Background()
		_, key, err := f.App.APIKeys.Create(ctx, "ops", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		uid := strconv.Itoa(f.user.ID)
		before := signInEverywhere(t, f, f.password)
		browser := auBrowser(t)
		if loc := f.signIn(t, browser, "alice", f.password, "").location(t); loc.Path != "/login" {
			t.Fatalf("browser sign-in went to %s", loc)
		}
		signedIn := func(fx *auFix) bool { // a signed-in browser goes straight to the approval page
			return auDo(t, browser, "GET", fx.authorizeURL(nil), nil).location(t).Path == "/oauth/approve"
		}
		if !signedIn(other) {
			t.Fatal("the browser is not signed in before the change")
		}
		if r := other.me(t, "Authorization", "Bearer "+before.jwt); r.status != 200 {
			t.Fatalf("the token before the change: %d %s", r.status, r.body)
		}

		refusedEverywhere := func(c revocationFix, what string) {
			t.Helper()
			other.me(t, "Authorization", "Bearer "+c.jwt).expectError(t, 401, "invalid_token")
			other.userinfo(t, c.access).expectError(t, 401, "invalid_token")
			other.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {c.refresh}}).expectError(t, 400, "invalid_grant")
			other.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {c.code}, "redirect_uri": {f.redirect}}).expectError(t, 400, "invalid_grant")
			if signedIn(other) {
				t.Fatalf("%s: the browser session survived", what)
			}
		}

		u := adminCall(t, f.Env, key, `mutation($id: ID!) { disableUser(id: $id) { id status tokensRevokedAt } }`, "disableUser", map[string]any{"id": uid})
		if u["status"] != float64(0) || u["tokensRevokedAt"] == nil {
			t.Fatalf("disableUser: %v", u)
		}
		refusedEverywhere(before, "disabled")
		other.login(t, `{"username":"alice","password":"`+f.password+`"}`).expectError(t, 401, "invalid_credentials")
		if r := other.signIn(t, auBrowser(t), "alice", f.password, ""); r.status != 401 {
			t.Fatalf("form login of a disabled user: %d", r.status)
		}

		// Enabled again: a fresh login works at once (even within the same
		// second as the disable); the old credentials stay refused.
		adminCall(t, f.Env, key, `mutation($id: ID!) { enableUser(id: $id) { id status } }`, "enableUser", map[string]any{"id": uid})
		again := signInEverywhere(t, other, f.password)
		if r := other.me(t, "Authorization", "Bearer "+again.jwt); r.status != 200 {
			t.Fatalf("a token issued after enableUser: %d %s", r.status, r.body)
		}
		if r := other.userinfo(t, again.access); r.status != 200 {
			t.Fatalf("an OAuth token issued after enableUser: %d %s", r.status, r.body)
		}
		refusedEverywhere(before, "enabled again")

		// A new password: the old one is refused, the new one signs in,
		// everything from before the change is refused.
		f.signIn(t, browser, "alice", f.password, "").location(t)
		if !signedIn(other) {
			t.Fatal("browser sign-in before the password change failed")
		}
		const newPassword = "a brand new passphrase"
		adminCall(t, f.Env, key, `mutation($id: ID!, $pw: String!) { setUserPassword(id: $id, password: $pw) { id status } }`,
			"setUserPassword", map[string]any{"id": uid, "pw": newPassword})
		refusedEverywhere(again, "new password")
		other.login(t, `{"username":"alice","password":"`+f.password+`"}`).expectError(t, 401, "invalid_credentials")
		other.password = newPassword
		fresh := signInEverywhere(t, other, newPassword)
		if r := other.me(t, "Authorization", "Bearer "+fresh.jwt); r.status != 200 {
			t.Fatalf("a token after the password change: %d %s", r.status, r.body)
		}

		// Refusals: the password rules of createUser, unknown users.
		for _, c := range []struct {
			query string
			vars  map[string]any
			code  string
		}{
			{`mutation($id: ID!) { setUserPassword(id: $id, password: "short") { id } }`, map[string]any{"id": uid}, "VALIDATION_FAILED"},
			{`mutation($id: ID!, $pw: String!) { setUserPassword(id: $id, password: $pw) { id } }`, map[string]any{"id": uid, "pw": strings.Repeat("x", 73)}, "VALIDATION_FAILED"},
			{`mutation { setUserPassword(id: 999999, password: "long enough") { id } }`, nil, "NOT_FOUND"},
			{`mutation { disableUser(id: 999999) { id } }`, nil, "NOT_FOUND"},
			{`mutation { enableUser(id: 999999) { id } }`, nil, "NOT_FOUND"},
		} {
			if code, _ := adminTry(t, f.Env, key, c.query, c.vars); code != c.code {
				t.Fatalf("%s: code %q, want %s", c.query, code, c.code)
			}
		}
		if r := other.me(t, "Authorization", "Bearer "+fresh.jwt); r.status != 200 {
			t.Fatalf("a refused setUserPassword revoked tokens: %d %s", r.status, r.body)
		}
	})
}
