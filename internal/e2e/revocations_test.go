package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/identity"
	"gatehouse/internal/oauth"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
)

// revocationFixture holds what TestRevocationsDurable revoked, and what it
// did not (the controls, which must keep working).
type revocationFixture struct {
	clientID, clientSecret string

	loggedOut, disabled, reset, kept string   // signed tokens
	many                             []string // logged out concurrently
	manyUsers                        []string // tokens of users disabled concurrently

	usedCode                   string // exchanged once
	revokedAccess              string // its pair revoked at /oauth/revoke
	familyAccess, familyRefres string // successor of a refresh token replayed
	disabledAccess             string // OAuth token of the disabled user
	keptAccess                 string // control
}

const revocationRedirect = "https://client.example/cb"

// TestRevocationsDurable: a logged-out signed token, the tokens of a
// disabled user and of a user given a new password (signed and OAuth), a
// used authorization code, a revoked OAuth pair and a replayed refresh
// token's family stay refused after the app restarts on the same
// database with an empty store (embedded: the in-process store is new;
// Postgres: a private Redis restarted empty, then flushed under the
// running app, then flushed before a restart). Tokens that were not
// revoked keep working throughout. Logouts and disables are made many at
// a time, concurrently.
func TestRevocationsDurable(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		cfg := apptest.Config(t, b)
		var rds *fleet.Redis
		if !b.Embedded() {
			rds = fleet.StartRedis(t)
			cfg.Redis.URL = rds.URL()
		}
		same := func(c *config.Config) { *c = cfg }
		e := apptest.Start(t, b, same)
		f := prepareRevocations(t, e)
		checkRevocations(t, e, f, "before any restart")

		restart := func(phase string, lose func()) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := e.App.Close(ctx); err != nil {
				t.Fatalf("%s: close: %v", phase, err)
			}
			if lose != nil {
				lose()
			}
			e = apptest.Start(t, b, same)
			checkRevocations(t, e, f, phase)
		}
		if b.Embedded() {
			restart("after a restart (new in-process store)", nil)
			return
		}
		restart("after a restart with Redis restarted empty", func() { rds.RestartEmpty(t) })
		rds.Flush(t)
		checkRevocations(t, e, f, "Redis flushed under the running app")
		restart("after a restart with Redis flushed", func() { rds.Flush(t) })
	})
}

func prepareRevocations(t *testing.T, e *apptest.Env) *revocationFixture {
	t.Helper()
	ctx := context.Background()
	f := &revocationFixture{}
	users := map[string]*ent.User{}
	for _, name := range []string{"logged-out", "disabled", "reset", "kept", "many"} {
		u, err := e.App.Users.Create(ctx, identity.NewUser{Username: name, Password: "password 1"})
		if err != nil {
			t.Fatal(err)
		}
		users[name] = u
	}
	f.loggedOut = revLogin(t, e, "logged-out")
	f.disabled = revLogin(t, e, "disabled")
	f.reset = revLogin(t, e, "reset")
	f.kept = revLogin(t, e, "kept")
	for range 30 {
		f.many = append(f.many, revLogin(t, e, "many"))
	}
	var manyIDs []int
	for i := range 10 {
		name := fmt.Sprintf("many-%d", i)
		u, err := e.App.Users.Create(ctx, identity.NewUser{Username: name, Password: "password 1"})
		if err != nil {
			t.Fatal(err)
		}
		manyIDs = append(manyIDs, u.ID)
		f.manyUsers = append(f.manyUsers, revLogin(t, e, name))
	}

	// OAuth: a client, and tokens from codes issued to the users.
	app, sec, err := e.App.Partners.Create(ctx, partner.CreateInput{AppName: "oauth client", RedirectURIs: []string{revocationRedirect}, Scopes: []string{"profile"}})
	if err != nil {
		t.Fatal(err)
	}
	f.clientID, f.clientSecret = app.AppKey, sec.AppSecret
	code := func(userID int) string {
		p, err := e.App.OAuth.Authorize(ctx, oauth.AuthorizeRequest{ClientID: app.AppKey, RedirectURI: revocationRedirect, Scope: "profile"})
		if err != nil {
			t.Fatal(err)
		}
		// Signed in just now: the user's current security version.
		c, err := e.App.OAuth.IssueCode(ctx, p, userID, time.Now(), e.App.DB.User.GetX(ctx, userID).SecurityVersion)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	exchange := func(c string) map[string]string {
		st, body := revToken(t, e, f, url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {revocationRedirect}})
		if st != 200 {
			t.Fatalf("exchange: %d %v", st, body)
		}
		return body
	}
	f.usedCode = code(users["kept"].ID)
	exchange(f.usedCode)
	f.revokedAccess = exchange(code(users["kept"].ID))["access_token"]
	if r := e.Do(t, "POST", e.PublicURL+"/oauth/revoke", revForm(f, url.Values{"token": {f.revokedAccess}}), "Content-Type", "application/x-www-form-urlencoded"); r.Status != 200 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	family := exchange(code(users["kept"].ID))
	st, next := revToken(t, e, f, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {family["refresh_token"]}})
	if st != 200 {
		t.Fatalf("refresh: %d %v", st, next)
	}
	f.familyAccess, f.familyRefres = next["access_token"], next["refresh_token"]
	if st, body := revToken(t, e, f, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {family["refresh_token"]}}); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("replayed refresh token: %d %v", st, body)
	}
	f.disabledAccess = exchange(code(users["disabled"].ID))["access_token"]
	f.keptAccess = exchange(code(users["kept"].ID))["access_token"]

	// The revocations: a logout, a disable, a new password, and many of
	// them at once.
	if r := e.Do(t, "POST", e.PublicURL+"/auth/logout", "", "Authorization", "Bearer "+f.loggedOut); r.Status != 200 {
		t.Fatalf("logout: %d %s", r.Status, r.Body)
	}
	if _, err := e.App.Users.Disable(ctx, users["disabled"].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.App.Users.SetPassword(ctx, users["reset"].ID, "password 2"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(f.many)+len(manyIDs))
	for _, tok := range f.many {
		wg.Go(func() {
			if r := e.Do(t, "POST", e.PublicURL+"/auth/logout", "", "Authorization", "Bearer "+tok); r.Status != 200 {
				errs <- fmt.Errorf("concurrent logout: %d %s", r.Status, r.Body)
			}
		})
	}
	for i, id := range manyIDs {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = e.App.Users.Disable(ctx, id)
			} else {
				_, err = e.App.Users.SetPassword(ctx, id, "password 2")
			}
			if err != nil {
				errs <- fmt.Errorf("concurrent revocation of user %d: %w", id, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return f
}

// checkRevocations fails the test for every revoked token or code that
// is accepted, and for every control that is refused.
func checkRevocations(t *testing.T, e *apptest.Env, f *revocationFixture, phase string) {
	t.Helper()
	me := func(tok string) int {
		return e.Do(t, "GET", e.PublicURL+"/api/auth/me", "", "Authorization", "Bearer "+tok).Status
	}
	for name, tok := range map[string]string{"logged-out": f.loggedOut, "disabled user's": f.disabled, "reset user's": f.reset} {
		if st := me(tok); st != 401 {
			t.Errorf("%s: the %s signed token answers %d, want 401", phase, name, st)
		}
	}
	for i, tok := range f.many {
		if st := me(tok); st != 401 {
			t.Errorf("%s: concurrently logged-out token %d answers %d, want 401", phase, i, st)
		}
	}
	for i, tok := range f.manyUsers {
		if st := me(tok); st != 401 {
			t.Errorf("%s: token of concurrently revoked user %d answers %d, want 401", phase, i, st)
		}
	}
	if st := me(f.kept); st != 200 {
		t.Errorf("%s: a signed token never revoked answers %d, want 200", phase, st)
	}
	userinfo := func(tok string) int {
		return e.Do(t, "GET", e.PublicURL+"/oauth/userinfo", "", "Authorization", "Bearer "+tok).Status
	}
	for name, tok := range map[string]string{"revoked": f.revokedAccess, "replayed family's": f.familyAccess, "disabled user's": f.disabledAccess} {
		if st := userinfo(tok); st != 401 {
			t.Errorf("%s: the %s OAuth access token answers %d, want 401", phase, name, st)
		}
	}
	if st := userinfo(f.keptAccess); st != 200 {
		t.Errorf("%s: an OAuth access token never revoked answers %d, want 200", phase, st)
	}
	if st, body := revToken(t, e, f, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {f.familyRefres}}); st != 400 || body["error"] != "invalid_grant" {
		t.Errorf("%s: the replayed family's refresh token: %d %v, want 400 invalid_grant", phase, st, body)
	}
	if st, body := revToken(t, e, f, url.Values{"grant_type": {"authorization_code"}, "code": {f.usedCode}, "redirect_uri": {revocationRedirect}}); st != 400 || body["error"] != "invalid_grant" {
		t.Errorf("%s: a used authorization code: %d %v, want 400 invalid_grant", phase, st, body)
	}
}

func revLogin(t *testing.T, e *apptest.Env, name string) string {
	t.Helper()
	r := e.Do(t, "POST", e.PublicURL+"/api/auth/login", `{"username":"`+name+`","password":"password 1"}`, apptest.JSONBody...)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if r.Status != 200 {
		t.Fatalf("login %s: %d %s", name, r.Status, r.Body)
	}
	r.JSON(t, &tok)
	return tok.AccessToken
}

func revForm(f *revocationFixture, v url.Values) string {
	v.Set("client_id", f.clientID)
	v.Set("client_secret", f.clientSecret)
	return v.Encode()
}

func revToken(t *testing.T, e *apptest.Env, f *revocationFixture, v url.Values) (int, map[string]string) {
	t.Helper()
	r := e.Do(t, "POST", e.PublicURL+"/oauth/token", revForm(f, v), "Content-Type", "application/x-www-form-urlencoded")
	body := map[string]string{}
	var raw map[string]any
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatalf("token endpoint: %d %q", r.Status, r.Body)
	}
	for k, v := range raw {
		if s, ok := v.(string); ok {
			body[k] = s
		} else {
			body[k] = strings.TrimSpace(fmt.Sprint(v))
		}
	}
	return r.Status, body
}

// TestRevocationsReachReplicasWithoutRedis: two replicas on one Postgres
// database that share no Redis keys (each its own prefix) — a logout and
// a disable on one are refused by the other within a second: its mirror
// learns them from the database (NOTIFY, else the 500 ms poll).
func TestRevocationsReachReplicasWithoutRedis(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("the embedded database serves one process; replicas need Postgres")
		}
		cfg := apptest.Config(t, b)
		one := apptest.Start(t, b, func(c *config.Config) { *c = cfg; c.Redis.KeyPrefix = b.KeyPrefix + "one:" })
		two := apptest.Start(t, b, func(c *config.Config) { *c = cfg; c.Redis.KeyPrefix = b.KeyPrefix + "two:" })
		ctx := context.Background()
		ids := map[string]int{}
		for _, name := range []string{"logged-out", "disabled"} {
			u, err := one.App.Users.Create(ctx, identity.NewUser{Username: name, Password: "password 1"})
			if err != nil {
				t.Fatal(err)
			}
			ids[name] = u.ID
		}
		out, dis := revLogin(t, one, "logged-out"), revLogin(t, one, "disabled")
		me := func(tok string) int {
			return two.Do(t, "GET", two.PublicURL+"/api/auth/me", "", "Authorization", "Bearer "+tok).Status
		}
		if me(out) != 200 || me(dis) != 200 {
			t.Fatal("the second replica refuses live tokens")
		}
		refusedWithin := func(what, tok string) {
			t.Helper()
			start := time.Now()
			for me(tok) != 401 {
				if time.Since(start) > time.Second {
					t.Fatalf("%s: the other replica still accepts the token after 1 s", what)
				}
				time.Sleep(5 * time.Millisecond) // polling the other replica
			}
			t.Logf("%s reached the other replica in %v", what, time.Since(start))
		}
		if r := one.Do(t, "POST", one.PublicURL+"/auth/logout", "", "Authorization", "Bearer "+out); r.Status != 200 {
			t.Fatalf("logout: %d %s", r.Status, r.Body)
		}
		refusedWithin("logout", out)
		if _, err := one.App.Users.Disable(ctx, ids["disabled"]); err != nil {
			t.Fatal(err)
		}
		refusedWithin("disable", dis)
	})
}
