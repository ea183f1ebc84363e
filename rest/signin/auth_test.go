package signin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/identity"
	"gatehouse/internal/testenv"
)

func (f *auFix) login(t *testing.T, body string) auResp {
	t.Helper()
	return auJSON(t, f.Client, f.PublicURL+"/api/auth/login", body)
}

func (f *auFix) loginToken(t *testing.T) string {
	t.Helper()
	r := f.login(t, `{"username":"alice","password":"`+f.password+`"}`)
	if r.status != 200 {
		t.Fatalf("login: HTTP %d %s", r.status, r.body)
	}
	return r.json(t)["access_token"].(string)
}

func (f *auFix) me(t *testing.T, headers ...string) auResp {
	t.Helper()
	return auDo(t, f.Client, "GET", f.PublicURL+"/api/auth/me", nil, headers...)
}

// TestJWTLogin covers every status and body of the login scheme.
func TestJWTLogin(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		r := f.login(t, `{"username":"alice","password":"`+f.password+`"}`)
		if r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("login: HTTP %d %v %s", r.status, r.header, r.body)
		}
		m := r.json(t)
		if len(m) != 3 || m["token_type"] != "Bearer" || m["expires_in"] != float64(7200) {
			t.Fatalf("login body %s", r.body)
		}
		raw := m["access_token"].(string)
		tok, _, err := jwt.NewParser().ParseUnverified(raw, jwt.MapClaims{})
		if err != nil {
			t.Fatal(err)
		}
		if tok.Header["alg"] != "HS256" {
			t.Fatalf("alg %v", tok.Header["alg"])
		}
		cl := tok.Claims.(jwt.MapClaims)
		if cl["sub"] != strconv.Itoa(f.user.ID) || cl["username"] != "alice" || cl["jti"] == "" ||
			cl["exp"].(float64)-cl["iat"].(float64) != 7200 {
			t.Fatalf("claims %v", cl)
		}
		if roles, _ := json.Marshal(cl["roles"]); string(roles) != `["admin","ops"]` {
			t.Fatalf("roles %s", roles)
		}

		r = f.me(t, "Authorization", "Bearer "+raw)
		if r.status != 200 {
			t.Fatalf("me: HTTP %d %s", r.status, r.body)
		}
		me := r.json(t)
		if len(me) != 4 || me["sub"] != strconv.Itoa(f.user.ID) || me["username"] != "alice" ||
			me["exp"] != cl["exp"] || strings.Join(toStrings(me["roles"]), ",") != "admin,ops" {
			t.Fatalf("me body %s", r.body)
		}
		// The scheme name is case-insensitive (RFC 6750).
		if r := f.me(t, "Authorization", "bearer "+raw); r.status != 200 {
			t.Fatalf("lower-case bearer: HTTP %d", r.status)
		}

		// Wrong credentials.
		for name, body := range map[string]string{
			"wrong password":   `{"username":"alice","password":"wrong password"}`,
			"unknown user":     `{"username":"nobody","password":"wrong password"}`,
			"empty strings":    `{"username":"","password":""}`,
			"very long fields": `{"username":"` + strings.Repeat("u", 300) + `","password":"` + strings.Repeat("p", 300) + `"}`,
		} {
			t.Run(name, func(t *testing.T) { f.login(t, body).expectError(t, 401, "invalid_credentials") })
		}
		// Malformed requests (a NUL is not text: refused before any lookup).
		for name, body := range map[string]string{
			"NUL in username":   `{"username":"al\u0000ice","password":"x"}`,
			"not JSON":          `username=alice`,
			"empty":             ``,
			"array":             `["alice","x"]`,
			"missing password":  `{"username":"alice"}`,
			"missing username":  `{"password":"x"}`,
			"number password":   `{"username":"alice","password":12345678}`,
			"null username":     `{"username":null,"password":"x"}`,
			"trailing garbage":  `{"username":"alice","password":"x"} {}`,
			"object password":   `{"username":"alice","password":{"a":1}}`,
			"truncated":         `{"username":"alice","password":"x`,
			"string not object": `"alice"`,
		} {
			t.Run(name, func(t *testing.T) { f.login(t, body).expectError(t, 400, "invalid_request") })
		}
		big := `{"username":"alice","password":"` + strings.Repeat("x", 70<<10) + `"}`
		if r := f.login(t, big); r.status != 413 {
			t.Fatalf("70 KiB body: HTTP %d", r.status)
		}
		// A disabled user cannot log in.
		bob := auUser(t, f.Env, "bob", "bob password 1")
		if _, err := f.App.DB.User.UpdateOneID(bob.ID).SetStatus(identity.UserDisabled).Save(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.login(t, `{"username":"bob","password":"bob password 1"}`).expectError(t, 401, "invalid_credentials")
		// Nothing secret in the logs.
		if logs := f.Logs.String(); strings.Contains(logs, f.password) || strings.Contains(logs, raw) {
			t.Fatal("a password or token reached the logs")
		}
	})
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestJWTRefusals: missing token → missing_token; every kind of bad token
// → invalid_token; all 401 with WWW-Authenticate.
func TestJWTRefusals(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		key := f.App.Cfg.JWTSecret
		now := time.Now()
		claims := func(exp time.Time) jwt.MapClaims {
			return jwt.MapClaims{"sub": strconv.Itoa(f.user.ID), "username": "alice", "roles": []string{"admin"},
				"iat": now.Add(-3 * time.Hour).Unix(), "exp": exp.Unix(), "jti": "j-" + strconv.FormatInt(now.UnixNano(), 10)}
		}
		sign := func(m jwt.SigningMethod, k any, c jwt.MapClaims) string {
			s, err := jwt.NewWithClaims(m, c).SignedString(k)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		forged := sign(jwt.SigningMethodHS256, key, claims(now.Add(time.Hour)))
		if r := f.me(t, "Authorization", "Bearer "+forged); r.status != 200 {
			t.Fatalf("a token signed with the configured key is refused: %d %s", r.status, r.body)
		}
		good := f.loginToken(t)
		parts := strings.Split(good, ".")
		none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
		for _, path := range []string{"/api/auth/me", "/auth/logout", "/api/auth/logout"} {
			method := map[string]string{"/api/auth/me": "GET", "/auth/logout": "POST", "/api/auth/logout": "POST"}[path]
			for name, hdr := range map[string][]string{
				"no header":        nil,
				"empty bearer":     {"Authorization", "Bearer "},
				"basic":            {"Authorization", "Basic YWxpY2U6eA=="},
				"token, no scheme": {"Authorization", good},
			} {
				t.Run(path+"/"+name, func(t *testing.T) {
					r := auDo(t, f.Client, method, f.PublicURL+path, nil, hdr...).expectError(t, 401, "missing_token")
					if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
						t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
					}
				})
			}
			for name, tok := range map[string]string{
				"garbage":          "abc.def.ghi",
				"alg none":         none,
				"HS512":            sign(jwt.SigningMethodHS512, key, claims(now.Add(time.Hour))),
				"other key":        sign(jwt.SigningMethodHS256, []byte("some-other-key-some-other-key-123"), claims(now.Add(time.Hour))),
				"expired":          sign(jwt.SigningMethodHS256, key, claims(now.Add(-time.Second))),
				"tampered payload": parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1","username":"root","roles":["admin"],"iat":1,"exp":9999999999,"jti":"x"}`)) + "." + parts[2],
			} {
				t.Run(path+"/"+name, func(t *testing.T) {
					r := auDo(t, f.Client, method, f.PublicURL+path, nil, "Authorization", "Bearer "+tok).expectError(t, 401, "invalid_token")
					if !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
						t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
					}
				})
			}
		}
	})
}

// TestJWTLogout: logout answers the envelope without data, and the token
// is refused from then on (me and a second logout, on either path); other
// tokens of the same user still work. POST /api/auth/logout is the same
// as POST /auth/logout.
func TestJWTLogout(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		for _, path := range []string{"/auth/logout", "/api/auth/logout"} {
			t.Run(path, func(t *testing.T) { testLogout(t, f, path) })
		}
	})
}

func testLogout(t *testing.T, f *auFix, path string) {
	{
		tok, other := f.loginToken(t), f.loginToken(t)
		r := auDo(t, f.Client, "POST", f.PublicURL+path, nil, "Authorization", "Bearer "+tok)
		if r.status != 200 {
			t.Fatalf("logout: HTTP %d %s", r.status, r.body)
		}
		var env map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &env); err != nil {
			t.Fatal(err)
		}
		if len(env) != 4 || string(env["code"]) != "200" || string(env["message"]) != `"success"` || env["timestamp"] == nil ||
			string(env["request_id"]) != strconv.Quote(r.header.Get("X-Request-Id")) {
			t.Fatalf("logout envelope %s", r.body)
		}
		if ts, _ := strconv.ParseInt(string(env["timestamp"]), 10, 64); time.Since(time.UnixMilli(ts)).Abs() > time.Minute {
			t.Fatalf("timestamp %s is not milliseconds of now", env["timestamp"])
		}
		f.me(t, "Authorization", "Bearer "+tok).expectError(t, 401, "invalid_token")
		for _, p := range []string{"/auth/logout", "/api/auth/logout"} {
			auDo(t, f.Client, "POST", f.PublicURL+p, nil, "Authorization", "Bearer "+tok).expectError(t, 401, "invalid_token")
			auDo(t, f.Client, "POST", f.PublicURL+p, nil).expectError(t, 401, "missing_token")
			if r := auDo(t, f.Client, "GET", f.PublicURL+p, nil, "Authorization", "Bearer "+other); r.status != 405 {
				t.Fatalf("GET %s: HTTP %d, want 405", p, r.status)
			}
		}
		if r := f.me(t, "Authorization", "Bearer "+other); r.status != 200 {
			t.Fatalf("another token of the user: HTTP %d %s", r.status, r.body)
		}
	}
}

// TestJWTLogoutAcrossInstances: a token logged out on one instance is
// refused by a second instance sharing Postgres and Redis.
func TestJWTLogoutAcrossInstances(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("the in-process store is per instance by design (one replica); shared state needs Redis")
		}
		keys := auSharedKeys()
		f1 := auSetup(t, b, keys)
		f2 := &auFix{Env: apptest.Start(t, b, keys), password: f1.password}
		tok := f1.loginToken(t)
		if r := f2.me(t, "Authorization", "Bearer "+tok); r.status != 200 {
			t.Fatalf("second instance refuses a live token: %d %s", r.status, r.body)
		}
		if r := auDo(t, f1.Client, "POST", f1.PublicURL+"/auth/logout", nil, "Authorization", "Bearer "+tok); r.status != 200 {
			t.Fatalf("logout: %d %s", r.status, r.body)
		}
		f2.me(t, "Authorization", "Bearer "+tok).expectError(t, 401, "invalid_token")
		// And the other way round.
		tok2 := f2.loginToken(t)
		if r := auDo(t, f2.Client, "POST", f2.PublicURL+"/auth/logout", nil, "Authorization", "Bearer "+tok2); r.status != 200 {
			t.Fatalf("logout on the second instance: %d %s", r.status, r.body)
		}
		f1.me(t, "Authorization", "Bearer "+tok2).expectError(t, 401, "invalid_token")
	})
}

// TestJWTThrottle: failed logins for one username are throttled (429
// too_many_attempts), counted atomically under concurrency, also for the
// right password once throttled; other usernames are not affected; a
// success before the limit clears the count.
func TestJWTThrottle(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		auUser(t, f.Env, "carol", "carol password")
		limit := identity.DefaultLoginAttempts
		// Carol fails limit-1 times, succeeds, and may fail again.
		for range limit - 1 {
			f.login(t, `{"username":"carol","password":"nope"}`).expectError(t, 401, "invalid_credentials")
		}
		if r := f.login(t, `{"username":"carol","password":"carol password"}`); r.status != 200 {
			t.Fatalf("carol's login before the limit: %d %s", r.status, r.body)
		}
		f.login(t, `{"username":"carol","password":"nope"}`).expectError(t, 401, "invalid_credentials")

		n := 2 * limit
		statuses := make([]int, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				req, _ := http.NewRequest("POST", f.PublicURL+"/api/auth/login", strings.NewReader(`{"username":"alice","password":"guess-`+strconv.Itoa(i)+`"}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := f.Client.Do(req)
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
		if count[401] != limit || count[429] != n-limit {
			t.Fatalf("%d concurrent wrong logins: %v, want %d×401 and %d×429", n, count, limit, n-limit)
		}
		r := f.login(t, `{"username":"alice","password":"`+f.password+`"}`).expectError(t, 429, "too_many_attempts")
		if r.header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		// The HTML form shares the count.
		if r := f.signIn(t, auBrowser(t), "alice", f.password, ""); r.status != 429 {
			t.Fatalf("form login while throttled: HTTP %d", r.status)
		}
		if r := f.login(t, `{"username":"carol","password":"carol password"}`); r.status != 200 {
			t.Fatalf("another user is throttled: %d %s", r.status, r.body)
		}
	})
}

// TestJWTConfiguredLifetime: GATEHOUSE_JWT_TTL sets the lifetime.
func TestJWTConfiguredLifetime(t *testing.T) {
	f := auSetup(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) { c.Auth.JWTTTL = 90 * time.Second })
	m := f.login(t, `{"username":"alice","password":"`+f.password+`"}`).json(t)
	if m["expires_in"] != float64(90) {
		t.Fatalf("expires_in %v", m["expires_in"])
	}
	tok, _, _ := jwt.NewParser().ParseUnverified(m["access_token"].(string), jwt.MapClaims{})
	cl := tok.Claims.(jwt.MapClaims)
	if cl["exp"].(float64)-cl["iat"].(float64) != 90 {
		t.Fatalf("exp-iat = %v", cl["exp"].(float64)-cl["iat"].(float64))
	}
}
