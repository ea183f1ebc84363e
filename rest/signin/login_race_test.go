package signin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// revokingAction is an admin mutation that ends a user's sign-ins, and
// what signs the user in afterwards (to show the check refuses only what
// it must).
type revokingAction struct {
	name  string
	query string
	vars  func(uid string) map[string]any
	// after signs alice in again once the action is done and returns the
	// password to use.
	after func(t *testing.T, f *auFix, key, uid string) string
}

const raceNewPassword = "a brand new passphrase"

var revokingActions = []revokingAction{
	{
		name:  "disableUser",
		query: `mutation($id: ID!) { disableUser(id: $id) { id status } }`,
		vars:  func(uid string) map[string]any { return map[string]any{"id": uid} },
		after: func(t *testing.T, f *auFix, key, uid string) string {
			adminCall(t, f.Env, key, `mutation($id: ID!) { enableUser(id: $id) { id status } }`, "enableUser", map[string]any{"id": uid})
			return f.password
		},
	},
	{
		name:  "setUserPassword",
		query: `mutation($id: ID!, $pw: String!) { setUserPassword(id: $id, password: $pw) { id status } }`,
		vars:  func(uid string) map[string]any { return map[string]any{"id": uid, "pw": raceNewPassword} },
		after: func(*testing.T, *auFix, string, string) string { return raceNewPassword },
	},
}

// loginHold holds logins between reading the user and checking the
// password (Users.SetAfterRead), the window a slow password hash leaves
// open, once armed: the first n logins that read the user after arm wait
// there until release.
type loginHold struct {
	armed   atomic.Bool
	n       int32
	count   atomic.Int32
	arrived chan struct{}
	hold    chan struct{}
}

func newLoginHold(f *auFix, n int) *loginHold {
	h := &loginHold{n: int32(n), arrived: make(chan struct{}, n), hold: make(chan struct{})}
	f.App.Users.SetAfterRead(func(context.Context, string) {
		if h.armed.Load() && h.count.Add(1) <= h.n {
			h.arrived <- struct{}{}
			<-h.hold
		}
	})
	return h
}

// arm starts holding logins and waits until n of them are held.
func (h *loginHold) arm(t *testing.T) {
	t.Helper()
	h.armed.Store(true)
	for i := int32(0); i < h.n; i++ {
		select {
		case <-h.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d logins reached the hold", i, h.n)
		}
	}
}

// TestLoginRacingARevocation: six clients loop POST /api/auth/login while
// disableUser (or setUserPassword) runs; three of those logins have read
// the user before the change and are held until it has committed (as a
// slow bcrypt would hold them), then answered. Every token collected —
// those issued before the change and those whose login was in flight —
// is refused afterwards, by the running service, and by a new process on
// the same database (on Postgres with the Redis keys of the test's prefix
// deleted: nothing in Redis helps). A login after the change (enabled
// again, or with the new password) is accepted by both.
func TestLoginRacingARevocation(t *testing.T) {
	for _, act := range revokingActions {
		t.Run(act.name, func(t *testing.T) {
			testenv.Run(t, func(t *testing.T, b testenv.Backend) {
				keys := auSharedKeys()
				f := auSetup(t, b, keys)
				_, key, err := f.App.APIKeys.Create(context.Background(), "ops", apikey.RoleAdmin)
				if err != nil {
					t.Fatal(err)
				}
				uid := strconv.Itoa(f.user.ID)
				// An OAuth token pair from the authorization-code flow,
				// signed in before the change.
				code, _ := f.code(t, nil)
				pair := f.exchange(t, code)
				access, refresh := pair["access_token"].(string), pair["refresh_token"].(string)
				hold := newLoginHold(f, 3)

				var (
					mu     sync.Mutex
					tokens []string
					wg     sync.WaitGroup
					stop   = make(chan struct{})
				)
				body := `{"username":"alice","password":"` + f.password + `"}`
				for range 6 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							select {
							case <-stop:
								return
							default:
							}
							tok, status := rawLogin(f, body)
							if status != http.StatusOK {
								return // the change is made: the old sign-in is refused
							}
							mu.Lock()
							tokens = append(tokens, tok)
							mu.Unlock()
						}
					}()
				}
				collected := func() int { mu.Lock(); defer mu.Unlock(); return len(tokens) }
				for deadline := time.Now().Add(10 * time.Second); collected() < 6; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the logins do not succeed")
					}
				}
				hold.arm(t)
				adminCall(t, f.Env, key, act.query, act.name, act.vars(uid))
				close(hold.hold)
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(15 * time.Second):
					close(stop)
					<-done
					t.Fatal("logins still succeed 15 s after the change")
				}
				f.App.Users.SetAfterRead(nil)
				t.Logf("%d tokens collected, %d logins held across the change", len(tokens), hold.n)

				refusedBy := func(e *apptest.Env, where string) {
					t.Helper()
					var kept int
					for _, tok := range tokens {
						if rawMe(e, tok) != http.StatusUnauthorized {
							kept++
						}
					}
					if kept > 0 {
						t.Errorf("%s: %d of %d tokens collected around %s are still accepted", where, kept, len(tokens), act.name)
					}
				}
				refusedBy(f.Env, "the running service")
				f.userinfo(t, access).expectError(t, 401, "invalid_token")

				pw := act.after(t, f, key, uid)
				fresh := f.login(t, `{"username":"alice","password":"`+pw+`"}`)
				if fresh.status != 200 {
					t.Fatalf("a login after %s: %d %s", act.name, fresh.status, fresh.body)
				}
				freshTok := fresh.json(t)["access_token"].(string)
				if s := rawMe(f.Env, freshTok); s != 200 {
					t.Fatalf("a token issued after %s: %d", act.name, s)
				}

				if !b.Embedded() {
					deletePrefixKeys(t, b)
				}
				again := apptest.Start(t, b, keys, func(c *config.Config) { c.Database.URL = f.App.Cfg.Database.URL })
				refusedBy(again, "a new process on the same database, with an empty shared store")
				g := &auFix{Env: again, app: f.app, secret: f.secret, redirect: f.redirect}
				g.userinfo(t, access).expectError(t, 401, "invalid_token")
				g.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}).expectError(t, 400, "invalid_grant")
				if s := rawMe(again, freshTok); s != 200 {
					t.Fatalf("after the restart, a token issued after %s: %d", act.name, s)
				}
			})
		})
	}
}

// TestFormLoginRacingARevocation: the browser sign-in of the OAuth flow
// (POST /login) has read the user before disableUser (or
// setUserPassword) commits and is held until it has; its session must
// not outlive the change: the browser is sent to sign in again and gets
// no authorization code, so no OAuth token comes from that sign-in.
func TestFormLoginRacingARevocation(t *testing.T) {
	for _, act := range revokingActions {
		t.Run(act.name, func(t *testing.T) {
			testenv.Run(t, func(t *testing.T, b testenv.Backend) {
				f := auSetup(t, b)
				_, key, err := f.App.APIKeys.Create(context.Background(), "ops", apikey.RoleAdmin)
				if err != nil {
					t.Fatal(err)
				}
				hold := newLoginHold(f, 1)
				browser := auBrowser(t)
				id := f.authorize(t, browser, nil)
				signedIn := make(chan *http.Response, 1)
				go func() {
					resp, err := browser.PostForm(f.PublicURL+"/login", url.Values{"username": {"alice"}, "password": {f.password}, "next": {"/oauth/approve?request_id=" + id}})
					if err != nil {
						signedIn <- nil
						return
					}
					resp.Body.Close()
					signedIn <- resp
				}()
				hold.arm(t)
				adminCall(t, f.Env, key, act.query, act.name, act.vars(strconv.Itoa(f.user.ID)))
				close(hold.hold)
				resp := <-signedIn
				if resp == nil {
					t.Fatal("the held sign-in failed")
				}
				t.Logf("the sign-in in flight during %s answered %d %s", act.name, resp.StatusCode, resp.Header.Get("Location"))

				if loc := auDo(t, browser, "GET", f.authorizeURL(nil), nil).location(t); loc.Path != "/login" {
					t.Errorf("after %s, the browser signed in during it is sent to %s, not to sign in again", act.name, loc.Path)
				}
				r := f.confirm(t, browser, id, true)
				if r.status == http.StatusFound {
					if code := r.location(t).Query().Get("code"); code != "" {
						tok := f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {f.redirect}})
						status := tok.status
						if status == 200 {
							status = f.userinfo(t, tok.json(t)["access_token"].(string)).status
						}
						t.Fatalf("a sign-in in flight during %s approved a request: code issued, exchange → %d, userinfo → %d", act.name, tok.status, status)
					}
				}
			})
		})
	}
}

// rawLogin posts a login from a goroutine (no t.Fatal there) and returns
// the token and the status (0 when the request failed).
func rawLogin(f *auFix, body string) (string, int) {
	resp, err := f.Client.Post(f.PublicURL+"/api/auth/login", "application/json", strings.NewReader(body))
	if err != nil {
		return "", 0
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		return "", resp.StatusCode
	}
	return out.AccessToken, http.StatusOK
}

// rawMe returns the status of GET /api/auth/me with token on e.
func rawMe(e *apptest.Env, token string) int {
	req, _ := http.NewRequest("GET", e.PublicURL+"/api/auth/me", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.Client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// deletePrefixKeys deletes every Redis key of the test's prefix (the
// shared Redis is never flushed whole).
func deletePrefixKeys(t *testing.T, b testenv.Backend) {
	t.Helper()
	opt, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	defer rc.Close()
	ctx := context.Background()
	iter := rc.Scan(ctx, 0, b.KeyPrefix+"*", 1000).Iterator()
	n := 0
	for iter.Next(ctx) {
		if err := rc.Del(ctx, iter.Val()).Err(); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no Redis key under the test's prefix: the deletion would prove nothing")
	}
}
