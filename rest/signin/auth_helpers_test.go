package signin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"gatehouse/ent"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/identity"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// Password hashing at the production cost would make every login of the
// auth tests take a quarter of a second; the algorithm is the same.
func init() { secret.PasswordCost = bcrypt.MinCost }

// auFix is a running gatehouse with an OAuth client (a partner app whose
// redirect URI is a local callback server), and a user.
type auFix struct {
	*apptest.Env
	app      partner.App
	secret   string
	redirect string
	user     *ent.User
	password string
	callback *auCallback
}

// auCallback is the client's redirect endpoint; it records the queries it
// receives (only the browser test follows redirects that far).
type auCallback struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []url.Values
}

func (c *auCallback) queries() []url.Values {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]url.Values(nil), c.got...)
}

func auSetup(t *testing.T, b testenv.Backend, opts ...apptest.Option) *auFix {
	t.Helper()
	e := apptest.Start(t, b, opts...)
	return auSetupOn(t, e)
}

func auSetupOn(t *testing.T, e *apptest.Env) *auFix {
	t.Helper()
	cb := &auCallback{}
	cb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" { // browsers also ask for /favicon.ico
			http.NotFound(w, r)
			return
		}
		cb.mu.Lock()
		cb.got = append(cb.got, r.URL.Query())
		cb.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<!doctype html><title>client callback</title><p id=done>back at the client</p>")
	}))
	t.Cleanup(cb.srv.Close)
	redirect := cb.srv.URL + "/callback"
	ctx := context.Background()
	app, sec, err := e.App.Partners.Create(ctx, partner.CreateInput{
		AppName:      `Acme <Partner> & "Co"`,
		RedirectURIs: []string{redirect},
		Scopes:       []string{"orders:read", "profile"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &auFix{Env: e, app: app, secret: sec.AppSecret, redirect: redirect, callback: cb, password: "correct horse battery"}
	f.user = auUser(t, e, "alice", f.password, "admin", "ops")
	return f
}

func auUser(t *testing.T, e *apptest.Env, name, password string, roles ...string) *ent.User {
	t.Helper()
	u, err := e.App.Users.Create(context.Background(), identity.NewUser{Username: name, Password: password, Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// auSharedKeys gives two instances the same master key and JWT secret, as
// replicas have.
func auSharedKeys() apptest.Option {
	mk := base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
	js := base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
	return func(c *config.Config) { c.Auth.MasterKeyB64, c.Auth.JWTSecretRaw = mk, js }
}

// auBrowser is an HTTP client with cookies that does not follow redirects,
// so each step of the flow can be checked.
func auBrowser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// auResp is a read response.
type auResp struct {
	status int
	header http.Header
	body   []byte
}

func (r auResp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("HTTP %d: body is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return m
}

// expectError fails unless the reply is status with exactly
// {"error": code} (plus an optional error_description).
func (r auResp) expectError(t *testing.T, status int, code string) auResp {
	t.Helper()
	if r.status != status {
		t.Fatalf("HTTP %d, want %d: %s", r.status, status, r.body)
	}
	m := r.json(t)
	if m["error"] != code {
		t.Fatalf("error %v, want %q: %s", m["error"], code, r.body)
	}
	for k := range m {
		if k != "error" && k != "error_description" {
			t.Fatalf("unexpected key %q in error body %s", k, r.body)
		}
	}
	return r
}

func (r auResp) location(t *testing.T) *url.URL {
	t.Helper()
	if r.status != http.StatusFound {
		t.Fatalf("HTTP %d, want a redirect: %s", r.status, r.body)
	}
	u, err := url.Parse(r.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// auDo sends a request with c; headers are name, value pairs.
func auDo(t *testing.T, c *http.Client, method, rawURL string, body io.Reader, headers ...string) auResp {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return auResp{resp.StatusCode, resp.Header, b}
}

func auForm(t *testing.T, c *http.Client, rawURL string, form url.Values, headers ...string) auResp {
	t.Helper()
	h := append([]string{"Content-Type", "application/x-www-form-urlencoded"}, headers...)
	return auDo(t, c, "POST", rawURL, strings.NewReader(form.Encode()), h...)
}

func auJSON(t *testing.T, c *http.Client, rawURL string, body string, headers ...string) auResp {
	t.Helper()
	h := append([]string{"Content-Type", "application/json"}, headers...)
	return auDo(t, c, "POST", rawURL, strings.NewReader(body), h...)
}

// authorizeURL builds /oauth/authorize for f's client with extra params.
func (f *auFix) authorizeURL(extra url.Values) string {
	q := url.Values{"client_id": {f.app.AppKey}, "redirect_uri": {f.redirect}, "response_type": {"code"}, "scope": {"profile"}, "state": {"st-123"}}
	for k, v := range extra {
		q[k] = v
	}
	return f.PublicURL + "/oauth/authorize?" + q.Encode()
}

// signIn posts the login form with browser c.
func (f *auFix) signIn(t *testing.T, c *http.Client, username, password, next string) auResp {
	t.Helper()
	return auForm(t, c, f.PublicURL+"/login", url.Values{"username": {username}, "password": {password}, "next": {next}})
}

// code runs the whole browser flow with a fresh browser (authorize, sign
// in, approve) and returns the code and state the client receives.
func (f *auFix) code(t *testing.T, extra url.Values) (string, string) {
	t.Helper()
	c := auBrowser(t)
	r := auDo(t, c, "GET", f.authorizeURL(extra), nil)
	loc := r.location(t)
	if loc.Path != "/login" {
		t.Fatalf("authorize sent the user to %s", loc)
	}
	id := requestID(t, loc)
	if loc := f.signIn(t, c, "alice", f.password, loc.Query().Get("next")).location(t); loc.Path != "/oauth/approve" || requestID(t, loc) != id {
		t.Fatalf("login sent the user to %s", loc)
	}
	loc = f.confirm(t, c, id, true).location(t)
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != f.redirect {
		t.Fatalf("confirm redirected to %s", loc)
	}
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", loc)
	}
	return code, loc.Query().Get("state")
}

// requestID returns the pending request's id from a redirect to the
// approval page, or to the login page that continues to it.
func requestID(t *testing.T, loc *url.URL) string {
	t.Helper()
	if loc.Path == "/login" {
		next, err := url.Parse(loc.Query().Get("next"))
		if err != nil {
			t.Fatal(err)
		}
		loc = next
	}
	id := loc.Query().Get("request_id")
	if loc.Path != "/oauth/approve" || id == "" {
		t.Fatalf("no pending request id in %s", loc)
	}
	return id
}

// authorize starts a flow with browser c and returns the pending
// request's id.
func (f *auFix) authorize(t *testing.T, c *http.Client, extra url.Values) string {
	t.Helper()
	return requestID(t, auDo(t, c, "GET", f.authorizeURL(extra), nil).location(t))
}

// confirm posts the approval form of pending request id.
func (f *auFix) confirm(t *testing.T, c *http.Client, id string, approved bool, headers ...string) auResp {
	t.Helper()
	return auForm(t, c, f.PublicURL+"/oauth/confirm", url.Values{"approved": {strconv.FormatBool(approved)}, "request_id": {id}}, headers...)
}

// token posts to /oauth/token with client credentials in the body.
func (f *auFix) token(t *testing.T, form url.Values) auResp {
	t.Helper()
	if form.Get("client_id") == "" {
		form.Set("client_id", f.app.AppKey)
		form.Set("client_secret", f.secret)
	}
	return auForm(t, f.Client, f.PublicURL+"/oauth/token", form)
}

func (f *auFix) exchange(t *testing.T, code string) map[string]any {
	t.Helper()
	r := f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {f.redirect}})
	if r.status != 200 {
		t.Fatalf("token exchange: HTTP %d %s", r.status, r.body)
	}
	return r.json(t)
}

func (f *auFix) userinfo(t *testing.T, access string) auResp {
	t.Helper()
	return auDo(t, f.Client, "GET", f.PublicURL+"/oauth/userinfo", nil, "Authorization", "Bearer "+access)
}
