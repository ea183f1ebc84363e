// Package fleettest_test runs gatehouse against private Redis deployments
// (internal/testenv/fleet): a Cluster, a Sentinel group failed over under
// load, a Redis restarted empty or flushed, and the embedded binary
// stopped with SIGTERM or kill -9. These tests start processes and wait
// for failovers, so they live in a package of their own and run in
// parallel with the rest.
package fleettest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/identity"
	"gatehouse/internal/partner"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

func init() { secret.PasswordCost = bcrypt.MinCost }

// binary is the gatehouse command, built once for the package's tests
// that run it as a process (they only run it, so they share it).
var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// gatehouseBinary builds cmd/gatehouse on first use and returns its path.
func gatehouseBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		if binary.dir, binary.err = os.MkdirTemp("", "fleettest-bin-"); binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "gatehouse")
		if out, err := exec.Command("go", "build", "-o", binary.path, "gatehouse/cmd/gatehouse").CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

const (
	userName     = "fleet-user"
	userPassword = "fleet password 1"
)

// fixture is gatehouse on Postgres and the given Redis URL, with a partner
// app, a SKU and a user.
type fixture struct {
	*apptest.Env
	app    partner.App
	secret string
	skuID  int
	// Set by setupHappy: the payment provider and the app's webhook receiver.
	provider *paymenttest.Provider
	hooks    *receiver
}

// setup is gatehouse on Postgres (a fresh database) and the Redis
// deployment at redisURL, which the test started for itself.
func setup(t *testing.T, redisURL string, opts ...apptest.Option) *fixture {
	t.Helper()
	return setupOn(t, privateRedis(t, redisURL), "", opts...)
}

// setupOn is gatehouse on backend b, with a partner app (callbackURL its
// webhook receiver, if any), a SKU and a user.
func setupOn(t *testing.T, b testenv.Backend, callbackURL string, opts ...apptest.Option) *fixture {
	t.Helper()
	e := apptest.Start(t, b, opts...)
	ctx := context.Background()
	f := &fixture{Env: e}
	var sec partner.Secrets
	var err error
	if f.app, sec, err = e.App.Partners.Create(ctx, partner.CreateInput{AppName: "fleet partner", CallbackURL: callbackURL}); err != nil {
		t.Fatal(err)
	}
	f.secret = sec.AppSecret
	sku, err := e.App.Inventory.CreateSku(ctx, "fleet widget", 1000)
	if err != nil {
		t.Fatal(err)
	}
	f.skuID = sku.ID
	if _, err := e.App.Users.Create(ctx, identity.NewUser{Username: userName, Password: userPassword, Roles: []string{"ops"}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// startReplica is another gatehouse on f's storage with f's keys.
func startReplica(t *testing.T, f *fixture, b testenv.Backend, opts ...apptest.Option) *apptest.Env {
	t.Helper()
	return apptest.Start(t, b, append([]apptest.Option{func(c *config.Config) {
		c.Auth.MasterKeyB64, c.Auth.JWTSecretRaw = f.App.Cfg.Auth.MasterKeyB64, f.App.Cfg.Auth.JWTSecretRaw
		c.Webhooks.AllowPrivate = f.App.Cfg.Webhooks.AllowPrivate
	}}, opts...)...)
}

// signedURL is an absolute signed URL of path with params, signed now.
func (f *fixture) signedURL(t testing.TB, method, path string, params url.Values) string {
	t.Helper()
	q, err := partnerclient.Signer{AppKey: f.app.AppKey, AppSecret: f.secret}.Sign(params)
	if err != nil {
		t.Fatal(err)
	}
	return f.PublicURL + path + "?" + q.Encode()
}

// result is a partner reply: HTTP status and envelope code.
type result struct {
	status, code int
	message      string
	err          error
}

func (r result) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	return strconv.Itoa(r.status) + "/" + strconv.Itoa(r.code) + " " + r.message
}

func (f *fixture) call(method, u string) result {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return result{err: err}
	}
	res, err := f.Client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer res.Body.Close()
	var env struct {
		Code    int
		Message string
	}
	body, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(body, &env)
	return result{status: res.StatusCode, code: env.Code, message: env.Message}
}

// query is a fresh signed order query (the order does not exist: 404/5001
// is the business answer of an admitted request).
func (f *fixture) query(t testing.TB) (string, result) {
	u := f.signedURL(t, "GET", "/api/v1/orders/query", url.Values{"order_no": {"NOPE"}})
	return u, f.call("GET", u)
}

// admitted: the gate let the request through to the business handler.
func admitted(r result) bool { return r.err == nil && r.status == 404 && r.code == 5001 }

// refusedReplay: a replayed URL is refused as a duplicate (4004) or as
// signed before the replay memory's start (4003), never served.
func refusedReplay(r result) bool {
	return r.err == nil && r.status == 401 && (r.code == 4004 || r.code == 4003 && strings.Contains(r.message, "replay memory"))
}

// login signs in and returns the bearer token.
func (f *fixture) login(t testing.TB) string {
	t.Helper()
	r := f.Do(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"`+userName+`","password":"`+userPassword+`"}`, "Content-Type", "application/json")
	if r.Status != 200 {
		t.Fatalf("login: %d %s", r.Status, r.Body)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	r.JSON(t, &tok)
	if tok.AccessToken == "" {
		t.Fatalf("login: no token in %s", r.Body)
	}
	return tok.AccessToken
}

func (f *fixture) me(t testing.TB, token string) int {
	t.Helper()
	return f.Do(t, "GET", f.PublicURL+"/api/auth/me", "", "Authorization", "Bearer "+token).Status
}

// readyz returns /readyz's status and fields.
func (f *fixture) readyz(t testing.TB) (int, map[string]string) {
	t.Helper()
	r := f.Do(t, "GET", f.PublicURL+"/readyz", "")
	var m map[string]string
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("readyz: %d %s", r.Status, r.Body)
	}
	return r.Status, m
}
