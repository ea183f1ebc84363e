package partnerapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// partnerWebhooksEnv starts gatehouse with callbacks to loopback allowed
// and two apps, A and B, each with its client.
func partnerWebhooksEnv(t *testing.T, b testenv.Backend) (*apptest.Env, *partnerclient.Client, *partnerclient.Client, partner.App) {
	t.Helper()
	e := apptest.Start(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
	appA, secA := createApp(t, e, partner.CreateInput{AppName: "app A"})
	appB, secB := createApp(t, e, partner.CreateInput{AppName: "app B"})
	return e, partnerclient.New(e.PublicURL, appA.AppKey, secA), partnerclient.New(e.PublicURL, appB.AppKey, secB), appA
}

// TestPartnerWebhookEndpoints: a partner creates, lists, reads, updates,
// rotates and deletes its endpoint through the signed API; the secret is
// shown on create and rotate only; a filter names catalogue types.
func TestPartnerWebhookEndpoints(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		_, a, _, _ := partnerWebhooksEnv(t, b)
		ctx := context.Background()
		u, desc := "https://hooks.partner.example/in", "orders"
		created, err := a.CreateEndpoint(ctx, partnerclient.EndpointInput{URL: &u, Description: &desc, EventTypes: &[]string{"order.paid"}})
		if err != nil || !strings.HasPrefix(created.Secret, "whsec_") || created.Endpoint.URL != u || created.Endpoint.EventTypes[0] != "order.paid" || !created.Endpoint.Enabled {
			t.Fatalf("create: %+v %v", created, err)
		}
		id := created.Endpoint.ID
		list, err := a.Endpoints(ctx)
		if err != nil || len(list) != 1 || list[0].ID != id {
			t.Fatalf("list: %+v %v", list, err)
		}
		raw, err := a.Do(ctx, "GET", "/api/v3/webhooks/endpoints/"+strconv.Itoa(id), nil)
		if err != nil || raw.Code != 200 || strings.Contains(string(raw.Data), created.Secret) || strings.Contains(string(raw.Data), "whsec_") {
			t.Fatalf("read shows the secret or failed: %+v %v", raw, err)
		}
		desc2, off, limit := "orders and refunds", false, 5
		up, err := a.UpdateEndpoint(ctx, id, partnerclient.EndpointInput{Description: &desc2, EventTypes: &[]string{}, Enabled: &off, RateLimit: &limit})
		if err != nil || up.Description != desc2 || len(up.EventTypes) != 0 || up.Enabled || up.RateLimit == nil || *up.RateLimit != 5 {
			t.Fatalf("update: %+v %v", up, err)
		}
		rot, err := a.RotateEndpointSecret(ctx, id)
		if err != nil || !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == created.Secret || rot.Endpoint.PreviousSecretExpiresAt == nil {
			t.Fatalf("rotate: %+v %v", rot, err)
		}
		if _, err := a.DeleteEndpoint(ctx, id); err != nil {
			t.Fatal(err)
		}
		_, err = a.Endpoint(ctx, id)
		if ae, ok := err.(*partnerclient.APIError); !ok || ae.Code != 5001 {
			t.Fatalf("read after delete: %v, want 5001", err)
		}
		// Bad input: a clear 5002 naming the field, nothing stored.
		for _, body := range []string{`{"url": "ftp://x"}`, `{"url": 5}`, `{"uri": "https://x.example"}`, `{"url": "https://x.example", "event_types": ["Not A Type"]}`, `[]`, `{"url": "https://x.example"} {}`} {
			r, err := a.DoBody(ctx, "POST", "/api/v3/webhooks/endpoints", nil, []byte(body))
			if err != nil || r.HTTPStatus != 400 || r.Code != 5002 {
				t.Fatalf("body %s: %+v %v", body, r, err)
			}
		}
		if list, _ := a.Endpoints(ctx); len(list) != 0 {
			t.Fatalf("refused creates stored %d endpoints", len(list))
		}
	})
}

// TestPartnerWebhookBodyBinding: the body is bound to the signature by
// content_sha256: a body changed after signing, or one without the
// digest, is 401/4002 and changes nothing.
func TestPartnerWebhookBodyBinding(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		_, a, _, _ := partnerWebhooksEnv(t, b)
		ctx := context.Background()
		send := func(signedBody, sentBody string, withDigest bool) (int, string) {
			p := url.Values{}
			if withDigest {
				sum := sha256.Sum256([]byte(signedBody))
				p.Set("content_sha256", hex.EncodeToString(sum[:]))
			}
			signed, err := a.Sign(p)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("POST", a.BaseURL+"/api/v3/webhooks/endpoints?"+signed.Encode(), strings.NewReader(sentBody))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&env)
			return resp.StatusCode, strconv.Itoa(env.Code) + " " + env.Message
		}
		good := `{"url": "https://hooks.partner.example/in"}`
		evil := `{"url": "https://attacker.example/in"}`
		if st, got := send(good, evil, true); st != 401 || !strings.HasPrefix(got, "4002 signature verification failed: content_sha256 does not match") {
			t.Fatalf("changed body: %d %s", st, got)
		}
		if st, got := send(good, good, false); st != 401 || !strings.HasPrefix(got, "4002 ") {
			t.Fatalf("no digest: %d %s", st, got)
		}
		if list, err := a.Endpoints(ctx); err != nil || len(list) != 0 {
			t.Fatalf("endpoints after refused bodies: %+v %v", list, err)
		}
		if st, got := send(good, good, true); st != 200 {
			t.Fatalf("bound body: %d %s", st, got)
		}
	})
}

// TestPartnerWebhooksOtherApp: app B addressing app A's endpoint or
// delivery gets 404/5001, as for an unknown id, and changes nothing.
func TestPartnerWebhooksOtherApp(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e, a, bc, appA := partnerWebhooksEnv(t, b)
		ctx := context.Background()
		u := "https://hooks.partner.example/in"
		created, err := a.CreateEndpoint(ctx, partnerclient.EndpointInput{URL: &u})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		d := e.App.DB.WebhookDelivery.Create().SetAppID(appA.ID).SetEndpointID(id).SetEventID("evt_a1").SetEventType("order.paid").
			SetBizData(`{"order_no":"SO1"}`).SetCallbackURL(u).SetStatus(webhookdelivery.StatusFAILED).SaveX(ctx)
		p := "/api/v3/webhooks/endpoints/" + strconv.Itoa(id)
		dp := "/api/v3/webhooks/deliveries/" + strconv.Itoa(d.ID)
		for _, c := range []struct{ method, path, body string }{
			{"GET", p, ""}, {"PATCH", p, `{"url": "https://attacker.example/in"}`}, {"DELETE", p, ""},
			{"POST", p + "/rotate-secret", ""}, {"POST", p + "/test", ""},
			{"GET", dp, ""}, {"POST", dp + "/resend", ""},
			{"GET", "/api/v3/webhooks/endpoints/999999", ""}, {"GET", "/api/v3/webhooks/deliveries/x", ""},
		} {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			r, err := bc.DoBody(ctx, c.method, c.path, nil, body)
			if err != nil || r.HTTPStatus != 404 || r.Code != 5001 {
				t.Fatalf("%s %s as app B: %+v %v", c.method, c.path, r, err)
			}
		}
		if n, err := bc.Recover(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
			t.Fatalf("app B recovered %d of A's deliveries: %v", n, err)
		}
		page, err := bc.Deliveries(ctx, partnerclient.DeliveryQuery{})
		if err != nil || len(page.Deliveries) != 0 {
			t.Fatalf("app B lists A's deliveries: %+v %v", page, err)
		}
		ep, err := a.Endpoint(ctx, id)
		if err != nil || ep.URL != u {
			t.Fatalf("A's endpoint after B's calls: %+v %v", ep, err)
		}
		if got := e.App.DB.WebhookDelivery.GetX(ctx, d.ID); got.Status != webhookdelivery.StatusFAILED {
			t.Fatalf("A's delivery is %s after B's resend", got.Status)
		}
		// An operator is told that B probed A's ids (answered as unknown).
		for _, kind := range []string{"endpoint", "delivery"} {
			if !strings.Contains(e.Logs.String(), "named another app's webhook "+kind) {
				t.Fatalf("no WARN for B naming A's %s:\n%s", kind, e.Logs.String())
			}
		}
	})
}

// TestPartnerWebhookDeliveries: a FAILED delivery is listed by
// status=FAILED, read with its attempts, and resent: it reaches the
// receiver. The catalogue lists order.paid; usage answers with the calls.
func TestPartnerWebhookDeliveries(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e, a, _, appA := partnerWebhooksEnv(t, b)
		ctx := context.Background()
		var got atomic.Int32
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
		t.Cleanup(recv.Close)
		created, err := a.CreateEndpoint(ctx, partnerclient.EndpointInput{URL: &recv.URL})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		for i := range 3 {
			st := webhookdelivery.StatusSUCCESS
			if i == 1 {
				st = webhookdelivery.StatusFAILED
			}
			e.App.DB.WebhookDelivery.Create().SetAppID(appA.ID).SetEndpointID(id).SetEventID("evt_" + strconv.Itoa(i)).SetEventType("order.paid").
				SetBizData(`{"order_no":"SO` + strconv.Itoa(i) + `"}`).SetCallbackURL(recv.URL).SetStatus(st).SaveX(ctx)
		}
		page, err := a.Deliveries(ctx, partnerclient.DeliveryQuery{Status: "FAILED"})
		if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].EventID != "evt_1" || page.NextCursor != nil {
			t.Fatalf("FAILED deliveries: %+v %v", page, err)
		}
		failed := page.Deliveries[0].ID
		// Paging: newest first, one a page.
		first, err := a.Deliveries(ctx, partnerclient.DeliveryQuery{Limit: 2})
		if err != nil || len(first.Deliveries) != 2 || first.Deliveries[0].EventID != "evt_2" || first.NextCursor == nil {
			t.Fatalf("page 1: %+v %v", first, err)
		}
		second, err := a.Deliveries(ctx, partnerclient.DeliveryQuery{Limit: 2, Cursor: *first.NextCursor})
		if err != nil || len(second.Deliveries) != 1 || second.Deliveries[0].EventID != "evt_0" || second.NextCursor != nil {
			t.Fatalf("page 2: %+v %v", second, err)
		}
		if r, err := a.Do(ctx, "GET", "/api/v3/webhooks/deliveries", url.Values{"status": {"LOST"}}); err != nil || r.Code != 5002 {
			t.Fatalf("bad status filter: %+v %v", r, err)
		}
		detail, err := a.Delivery(ctx, failed)
		if err != nil || detail.Payload == nil || *detail.Payload != `{"order_no":"SO1"}` || detail.Attempts == nil {
			t.Fatalf("detail: %+v %v", detail, err)
		}
		if d, err := a.Resend(ctx, failed); err != nil || d.Status != "PENDING" {
			t.Fatalf("resend: %+v %v", d, err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			d, err := a.Delivery(ctx, failed)
			if err == nil && d.Status == "SUCCESS" && len(d.Attempts) == 1 && d.Attempts[0].ResponseStatus != nil && *d.Attempts[0].ResponseStatus == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("resent delivery: %+v %v", d, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got.Load() < 1 {
			t.Fatal("the receiver saw nothing")
		}
		types, err := a.EventTypes(ctx)
		found := false
		for _, ty := range types {
			found = found || (ty.Name == "order.paid" && ty.BuiltIn && len(ty.Schema) > 0)
		}
		if err != nil || !found {
			t.Fatalf("catalogue: %+v %v", types, err)
		}
		if err := e.App.Usage.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		u, err := a.Usage(ctx)
		if err != nil || u.RateLimit != 1000 || len(u.Versions) != 1 || u.Versions[0].Version != "v3" || u.Versions[0].Calls < 5 || len(u.PerDay) != 1 {
			t.Fatalf("usage: %+v %v", u, err)
		}
	})
}

// TestPartnerWebhookRetryAndHeaders: a partner sets its endpoint's retry
// schedule (or the LONG preset) and custom headers; reads show the
// schedule and the headers' names, never their values; limits of the
// admin mutations apply (400/5002 naming the field, nothing changed).
func TestPartnerWebhookRetryAndHeaders(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		_, a, _, _ := partnerWebhooksEnv(t, b)
		ctx := context.Background()
		u := "https://hooks.partner.example/in"
		created, err := a.CreateEndpoint(ctx, partnerclient.EndpointInput{URL: &u, RetrySchedule: &[]int{1, 1, 1},
			Headers: &map[string]string{"X-Partner-Token": "tok-secret-value"}})
		if err != nil || len(created.Endpoint.RetrySchedule) != 3 || len(created.Endpoint.HeaderNames) != 1 || created.Endpoint.HeaderNames[0] != "X-Partner-Token" {
			t.Fatalf("create: %+v %v", created, err)
		}
		id := created.Endpoint.ID
		raw, err := a.Do(ctx, "GET", "/api/v3/webhooks/endpoints/"+strconv.Itoa(id), nil)
		if err != nil || raw.Code != 200 || strings.Contains(string(raw.Data), "tok-secret-value") {
			t.Fatalf("read: %+v %v", raw, err)
		}
		long := "LONG"
		ep, err := a.UpdateEndpoint(ctx, id, partnerclient.EndpointInput{RetryPreset: &long})
		if err != nil || len(ep.RetrySchedule) != 7 || ep.RetrySchedule[1] != 300 {
			t.Fatalf("LONG preset: %+v %v", ep, err)
		}
		for _, body := range []string{
			`{"retry_schedule": [` + strings.TrimSuffix(strings.Repeat("1,", 20), ",") + `]}`,
			`{"retry_schedule": [2592001]}`,
			`{"retry_schedule": [-1]}`,
			`{"retry_schedule": [1], "retry_preset": "LONG"}`,
			`{"retry_preset": "FOREVER"}`,
			`{"headers": {"webhook-signature": "v1,forged"}}`,
			`{"headers": {"Host": "evil.example"}}`,
			`{"headers": {"X-A": 5}}`,
		} {
			r, err := a.DoBody(ctx, "PATCH", "/api/v3/webhooks/endpoints/"+strconv.Itoa(id), nil, []byte(body))
			if err != nil || r.HTTPStatus != 400 || r.Code != 5002 {
				t.Fatalf("body %s: %+v %v", body, r, err)
			}
		}
		r, err := a.DoBody(ctx, "PATCH", "/api/v3/webhooks/endpoints/"+strconv.Itoa(id), nil, []byte(`{"retry_schedule": null, "headers": {}}`))
		if err != nil || r.Code != 200 {
			t.Fatalf("back to the defaults: %+v %v", r, err)
		}
		if err := json.Unmarshal(r.Data, &ep); err != nil || ep.RetrySchedule != nil || len(ep.HeaderNames) != 0 {
			t.Fatalf("back to the defaults: %+v %v", ep, err)
		}
	})
}
