package console_test

import (
	"bytes"
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

// fixture is a running gatehouse with an ADMIN and a READ_ONLY key, an
// app with one endpoint at a local receiver that answers 200, and a
// FAILED delivery (one failed attempt) among a few others.
type fixture struct {
	env             *apptest.Env
	admin, readOnly string
	appID, endpoint int
	receiverURL     string
	failed          *ent.WebhookDelivery
	failedEventType string
	received        chan struct{}
}

func start(t testing.TB, b testenv.Backend, appName string) *fixture {
	t.Helper()
	f := &fixture{received: make(chan struct{}, 100), failedEventType: "order.refunded"}
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
	f.env = apptest.Start(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
	lastLogs = f.env.Logs.String
	ctx := context.Background()
	var err error
	if _, f.admin, err = f.env.App.APIKeys.Create(ctx, "console admin", apikey.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if _, f.readOnly, err = f.env.App.APIKeys.Create(ctx, "console reader", apikey.RoleReadOnly); err != nil {
		t.Fatal(err)
	}
	var created struct {
		CreatePartnerApp struct{ App struct{ ID string } }
	}
	f.gql(t, `mutation($n: String!) { createPartnerApp(input: {appName: $n}) { app { id } } }`, map[string]any{"n": appName}, &created)
	f.appID, _ = strconv.Atoi(created.CreatePartnerApp.App.ID)
	var ep struct {
		CreateWebhookEndpoint struct{ Endpoint struct{ ID string } }
	}
	f.gql(t, `mutation($app: ID!, $url: String!) { createWebhookEndpoint(appID: $app, input: {url: $url, description: "billing <b>receiver</b>"}) { endpoint { id } } }`,
		map[string]any{"app": f.appID, "url": f.receiverURL}, &ep)
	f.endpoint, _ = strconv.Atoi(ep.CreateWebhookEndpoint.Endpoint.ID)
	c := f.env.App.DB.Client
	// Deliveries as the dispatcher leaves them: finished ones (so that the
	// dispatcher has nothing to do until a resend) of other types, and one
	// FAILED order.refunded whose payload carries markup.
	for i, typ := range []string{"order.paid", "order.cancelled", "order.paid"} {
		if _, err := c.WebhookDelivery.Create().SetAppID(f.appID).SetEndpointID(f.endpoint).SetEventID("evt_ok_" + strconv.Itoa(i)).
			SetEventType(typ).SetBizData(`{"order_no":"SO` + strconv.Itoa(i) + `"}`).SetCallbackURL(f.receiverURL).
			SetStatus(webhookdelivery.StatusSUCCESS).SetAttemptCount(1).Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.failed, err = c.WebhookDelivery.Create().SetAppID(f.appID).SetEndpointID(f.endpoint).SetEventID("evt_failed_1").
		SetEventType(f.failedEventType).SetBizData(`{"order_no":"SO9","note":"<script>alert(1)</script>"}`).SetCallbackURL(f.receiverURL).
		SetStatus(webhookdelivery.StatusFAILED).SetAttemptCount(1).SetRetryCount(1).SetMaxRetry(1).SetLastError("HTTP 503").Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeliveryAttempt.Create().SetDeliveryID(f.failed.ID).SetAttemptNo(1).SetRequestHeaders("{}").SetRequestBody(f.failed.BizData).
		SetResponseStatus(503).SetResponseBody("<h1>down</h1>").SetDurationMs(12).SetStartedAt(time.Now().Add(-time.Minute)).Save(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

// gql runs a GraphQL operation as the admin key (setup only).
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

// status reads a delivery's status from the database.
func (f *fixture) status(t testing.TB, id int) webhookdelivery.Status {
	t.Helper()
	d, err := f.env.App.DB.Client.WebhookDelivery.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Status
}

// browserless is a plain HTTP client with a cookie jar that does not
// follow redirects, and records every page, header and URL it saw.
type browserless struct {
	t    testing.TB
	c    *http.Client
	base string
	seen bytes.Buffer
}

func newClient(t testing.TB, f *fixture) *browserless {
	jar, _ := cookiejar.New(nil)
	return &browserless{t: t, base: f.env.AdminURL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the token in the page's forms.
func (p page) csrf(t testing.TB) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token in %s (%s)", p.body, lastLogs())
	}
	return m[1]
}

func (b *browserless) do(method, path string, form url.Values, header ...string) page {
	b.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	b.seen.WriteString(req.URL.String() + "\n")
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	b.seen.WriteString(res.Request.URL.String() + "\n")
	for k, v := range res.Header {
		b.seen.WriteString(k + ": " + strings.Join(v, ",") + "\n")
	}
	b.seen.Write(body)
	return page{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (b *browserless) get(path string) page { return b.do("GET", path, nil) }

// signIn signs in with key and returns the first page.
func (b *browserless) signIn(key string) page {
	b.t.Helper()
	p := b.get("/console/sign-in")
	r := b.do("POST", "/console/sign-in", url.Values{"api_key": {key}, "csrf": {p.csrf(b.t)}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/deliveries" {
		b.t.Fatalf("sign-in: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	return b.get("/console/deliveries")
}

// cookie is the console session cookie the jar holds.
func (b *browserless) cookie() *http.Cookie {
	u, _ := url.Parse(b.base + "/console/")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "gatehouse_console" {
			return c
		}
	}
	return nil
}

// lastLogs is what the running test's gatehouse logged (to explain a
// failure).
var lastLogs = func() string { return "" }
