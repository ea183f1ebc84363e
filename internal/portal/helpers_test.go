package portal_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// hostileDescription is an endpoint description a partner (or anyone
// who can write one) might try: it must render as text.
const hostileDescription = `billing <script>alert(1)</script>`

// fixture is a running gatehouse with an ADMIN key and two apps, A and
// B, each with one endpoint at a local receiver that answers 200 and a
// FAILED delivery (one failed attempt).
type fixture struct {
	env              *apptest.Env
	admin            string
	appA, appB       int
	appSecretA       string
	endpointA, endB  int
	receiverURL      string
	failedA, failedB *ent.WebhookDelivery
	received         chan struct{}
}

func start(t testing.TB, b testenv.Backend, opts ...apptest.Option) *fixture {
	t.Helper()
	f := &fixture{received: make(chan struct{}, 100)}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case f.received <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(recv.Close)
	f.receiverURL = recv.URL + "/hooks"
	opts = append([]apptest.Option{func(c *config.Config) { c.Webhooks.AllowPrivate = true }}, opts...)
	f.env = apptest.Start(t, b, opts...)
	ctx := context.Background()
	var err error
	if _, f.admin, err = f.env.App.APIKeys.Create(ctx, "portal admin", apikey.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	f.appA, f.appSecretA, f.endpointA, f.failedA = f.app(t, "shop-a", hostileDescription)
	f.appB, _, f.endB, f.failedB = f.app(t, "shop-b", "b's receiver")
	return f
}

// app creates an app with one endpoint and a FAILED delivery.
func (f *fixture) app(t testing.TB, name, description string) (int, string, int, *ent.WebhookDelivery) {
	t.Helper()
	var created struct {
		CreatePartnerApp struct {
			App       struct{ ID string }
			AppSecret string
		}
	}
	f.gql(t, `mutation($n: String!) { createPartnerApp(input: {appName: $n}) { app { id } appSecret } }`, map[string]any{"n": name}, &created)
	appID, _ := strconv.Atoi(created.CreatePartnerApp.App.ID)
	var ep struct {
		CreateWebhookEndpoint struct{ Endpoint struct{ ID string } }
	}
	f.gql(t, `mutation($app: ID!, $url: String!, $d: String!) { createWebhookEndpoint(appID: $app, input: {url: $url, description: $d}) { endpoint { id } } }`,
		map[string]any{"app": appID, "url": f.receiverURL, "d": description}, &ep)
	epID, _ := strconv.Atoi(ep.CreateWebhookEndpoint.Endpoint.ID)
	ctx := context.Background()
	c := f.env.App.DB.Client
	// A FAILED delivery as the dispatcher leaves it (nothing for it to do
	// until a resend).
	d, err := c.WebhookDelivery.Create().SetAppID(appID).SetEndpointID(epID).SetEventID("evt_failed_" + name).
		SetEventType("order.refunded").SetBizData(`{"order_no":"SO9"}`).SetCallbackURL(f.receiverURL).
		SetStatus(webhookdelivery.StatusFAILED).SetAttemptCount(1).SetRetryCount(1).SetMaxRetry(1).SetLastError("HTTP 503").Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeliveryAttempt.Create().SetDeliveryID(d.ID).SetAttemptNo(1).SetRequestHeaders("{}").SetRequestBody(d.BizData).
		SetResponseStatus(503).SetResponseBody("<h1>down</h1>").SetDurationMs(12).SetStartedAt(time.Now().Add(-time.Minute)).Save(ctx); err != nil {
		t.Fatal(err)
	}
	return appID, created.CreatePartnerApp.AppSecret, epID, d
}

// gql runs a GraphQL operation as the admin key.
func (f *fixture) gql(t testing.TB, query string, vars map[string]any, out any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	r := f.env.Do(t, "POST", f.env.AdminURL+"/graphql", string(body), "Content-Type", "application/json", "X-API-Key", f.admin)
	var res struct {
		Data   json.RawMessage
		Errors []any
	}
	r.JSON(t, &res)
	if len(res.Errors) > 0 {
		t.Fatalf("%s: %s", query, r.Body)
	}
	if out != nil {
		if err := json.Unmarshal(res.Data, out); err != nil {
			t.Fatal(err)
		}
	}
}

// link mints a portal link for app and returns its path (and query).
func (f *fixture) link(t testing.TB, app int, readOnly bool, ttl int) string {
	t.Helper()
	var out struct {
		CreatePortalLink struct {
			URL       string
			ExpiresAt time.Time
		}
	}
	vars := map[string]any{"app": app, "ro": readOnly}
	if ttl != 0 {
		vars["ttl"] = ttl
	}
	f.gql(t, `mutation($app: ID!, $ro: Boolean, $ttl: Int) { createPortalLink(appID: $app, readOnly: $ro, ttl: $ttl) { url expiresAt } }`, vars, &out)
	u, err := url.Parse(out.CreatePortalLink.URL)
	if err != nil || !strings.HasPrefix(u.Path, "/portal/enter") || u.Query().Get("token") == "" {
		t.Fatalf("link %q", out.CreatePortalLink.URL)
	}
	if d := time.Until(out.CreatePortalLink.ExpiresAt); d <= 0 || d > time.Duration(max(ttl, 3600))*time.Second+time.Minute {
		t.Fatalf("expiresAt %v", out.CreatePortalLink.ExpiresAt)
	}
	return u.RequestURI()
}

// status reads a delivery's status from the database.
func (f *fixture) status(t testing.TB, id int) webhookdelivery.Status {
	t.Helper()
	d, err := f.env.App.DB.Client.WebhookDelivery.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Status
}

// client is a plain HTTP client with a cookie jar that does not follow
// redirects, and keeps every body it read.
type client struct {
	t    testing.TB
	c    *http.Client
	base string
	seen strings.Builder
}

func newClient(t testing.TB, base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (p page) csrf(t testing.TB) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token in %s", p.body)
	}
	return m[1]
}

func (c *client) do(method, path string, form url.Values, header ...string) page {
	c.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	c.seen.Write(body)
	return page{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (c *client) get(path string) page { return c.do("GET", path, nil) }

// open opens link the way a browser does: its page (which spends
// nothing), then the page's button, a same-origin POST of the token with
// the anonymous session's CSRF token.
func (c *client) open(link string) page {
	c.t.Helper()
	g := c.get(link)
	if g.status != http.StatusOK {
		return g
	}
	lu, _ := url.Parse(link)
	return c.do("POST", "/portal/enter", url.Values{"token": {lu.Query().Get("token")}, "csrf": {g.csrf(c.t)}}, "Origin", c.base)
}

// enter opens link and expects the endpoints page.
func (c *client) enter(link string) page {
	c.t.Helper()
	r := c.open(link)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/portal/endpoints" {
		c.t.Fatalf("enter: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	return c.get("/portal/endpoints")
}

// cookie is the named cookie the jar holds for the portal.
func (c *client) cookie(name, path string) *http.Cookie {
	u, _ := url.Parse(c.base + path)
	for _, k := range c.c.Jar.Cookies(u) {
		if k.Name == name {
			return k
		}
	}
	return nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func itoa(n int) string { return strconv.Itoa(n) }
