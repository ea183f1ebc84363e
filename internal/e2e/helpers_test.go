package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/identity"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// Password hashing at the production cost would make each login take a
// quarter of a second; the algorithm is the same.
func init() { secret.PasswordCost = bcrypt.MinCost }

// The fixture's user.
const (
	userName     = "e2e-alice"
	userPassword = "correct horse battery"
)

// fixture is a running gatehouse with two partner apps (the second one
// rate-limited to 1 request/s), orders of both, a SKU, a user, and a local
// OAuth redirect target.
type fixture struct {
	*apptest.Env
	app, other       partner.App
	secret, otherSec string
	webhookSecret    string
	slow             partner.App
	slowSec          string
	skuID            int
	redirect         string
}

func setup(t *testing.T, b testenv.Backend, opts ...apptest.Option) *fixture {
	t.Helper()
	e := apptest.Start(t, b, opts...)
	ctx := context.Background()
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(cb.Close)
	f := &fixture{Env: e, redirect: cb.URL + "/callback"}
	var sec partner.Secrets
	var err error
	f.app, sec, err = e.App.Partners.Create(ctx, partner.CreateInput{
		AppName:      "E2E partner",
		RedirectURIs: []string{f.redirect},
		Scopes:       []string{"orders:read", "profile"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.secret, f.webhookSecret = sec.AppSecret, sec.WebhookSecret
	if f.other, sec, err = e.App.Partners.Create(ctx, partner.CreateInput{AppName: "E2E other"}); err != nil {
		t.Fatal(err)
	}
	f.otherSec = sec.AppSecret
	one := 1
	if f.slow, sec, err = e.App.Partners.Create(ctx, partner.CreateInput{AppName: "E2E slow", RateLimit: &one}); err != nil {
		t.Fatal(err)
	}
	f.slowSec = sec.AppSecret
	for _, in := range []order.CreateInput{
		{AppID: f.app.ID, OrderNo: "SO1001", Amount: "99.90", CustomerName: "Li Lei", CustomerPhone: "13800000000", CustomerEmail: "alice@example.com"},
		{AppID: f.app.ID, OrderNo: "SO1002", Amount: "5"},
		{AppID: f.other.ID, OrderNo: "SO2001", Amount: "1.50"},
		{AppID: f.slow.ID, OrderNo: "SO3001", Amount: "3.00"},
	} {
		if _, err := e.App.Orders.Create(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.App.Orders.Pay(ctx, "SO1001"); err != nil {
		t.Fatal(err)
	}
	sku, err := e.App.Inventory.CreateSku(ctx, "e2e widget", 10)
	if err != nil {
		t.Fatal(err)
	}
	f.skuID = sku.ID
	if _, err := e.App.Users.Create(ctx, identity.NewUser{Username: userName, Password: userPassword, Roles: []string{"ops"}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// signed returns the absolute signed URL of path with params for the app
// with key and secret sec.
func (f *fixture) signed(t testing.TB, key, sec, path string, params url.Values) string {
	t.Helper()
	q, err := partnerclient.Signer{AppKey: key, AppSecret: sec}.Sign(params)
	if err != nil {
		t.Fatal(err)
	}
	return f.PublicURL + path + "?" + q.Encode()
}

// resp is a read response.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) object(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("HTTP %d: body is not a JSON object: %v\n%q", r.status, err, r.body)
	}
	return m
}

// send performs req with c and reads the whole reply.
func send(t testing.TB, c *http.Client, req *http.Request) resp {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

// newRequest builds a request; headers are name, value pairs.
func newRequest(t testing.TB, method, rawURL, body string, headers ...string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// browser is a client with cookies that does not follow redirects.
func browser(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// form is the Content-Type pair of form bodies.
var form = []string{"Content-Type", "application/x-www-form-urlencoded"}

// orderInput is an order of app appID with a customer.
func orderInput(appID int, orderNo string) order.CreateInput {
	return order.CreateInput{AppID: appID, OrderNo: orderNo, Amount: "12.34", CustomerName: "Han Meimei", CustomerPhone: "13900001111", CustomerEmail: "han@example.com"}
}

// pendingID returns the pending authorization request's id from the
// Location of /oauth/authorize (the approval page, or the login page that
// continues to it).
func pendingID(t testing.TB, location string) string {
	t.Helper()
	u, err := url.Parse(location)
	if err == nil && u.Path == "/login" {
		u, err = url.Parse(u.Query().Get("next"))
	}
	if err != nil || u.Path != "/oauth/approve" || u.Query().Get("request_id") == "" {
		t.Fatalf("no pending request id in %q", location)
	}
	return u.Query().Get("request_id")
}
