package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
	"gatehouse/rest/partnerclient"
)

// TestEnableAPIKey: a disabled key is refused; enableAPIKey (by another
// key) lets it in again from the next request, on another replica too.
func TestEnableAPIKey(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		replica := apptest.Start(t, b, func(c *config.Config) {
			c.Database.URL = a.App.Cfg.Database.URL
			c.Auth.MasterKeyB64 = a.App.Cfg.Auth.MasterKeyB64
		})
		k := a.gql(t, `mutation { createAPIKey(name: "second") { key apiKey { id role } } }`, nil).ok(t, "createAPIKey")
		if str(k, "apiKey", "role") != "ADMIN" {
			t.Fatalf("default role: %v", k)
		}
		id := str(k, "apiKey", "id")
		a.gql(t, `mutation($id: ID!) { disableAPIKey(id: $id) { status } }`, map[string]any{"id": id}).ok(t, "disableAPIKey")
		if r := gqlAs(t, replica, str(k, "key"), `{ apiKeys { totalCount } }`, nil); r.Status != 401 || !strings.Contains(r.Body, "invalid_api_key") {
			t.Fatalf("disabled key: %d %s", r.Status, r.Body)
		}
		e := a.gql(t, `mutation($id: ID!) { enableAPIKey(id: $id) { id status } }`, map[string]any{"id": id}).ok(t, "enableAPIKey")
		if num(e, "status") != 1 {
			t.Fatalf("enableAPIKey: %v", e)
		}
		gqlAs(t, replica, str(k, "key"), `{ apiKeys { totalCount } }`, nil).ok(t, "apiKeys")
		a.gql(t, `mutation($id: ID!) { enableAPIKey(id: $id) { status } }`, map[string]any{"id": id}).ok(t, "enableAPIKey") // again: no error
		a.gql(t, `mutation { enableAPIKey(id: 987654) { id } }`, nil).fails(t, "NOT_FOUND")
	})
}

// hookSink records the deliveries it receives.
type hookSink struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request
	bod [][]byte
}

func newHookSink(t *testing.T) *hookSink {
	s := &hookSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got, s.bod = append(s.got, r), append(s.bod, b)
		s.mu.Unlock()
		w.WriteHeader(200)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// waitFor returns the delivery carrying orderNo in its body.
func (s *hookSink) waitFor(t *testing.T, orderNo string) (*http.Request, []byte) {
	t.Helper()
	var req *http.Request
	var body []byte
	eventually(t, 10*time.Second, "the delivery of "+orderNo, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, b := range s.bod {
			if strings.Contains(string(b), orderNo) {
				req, body = s.got[i], b
				return true
			}
		}
		return false
	})
	return req, body
}

// TestEndSecretOverlap: after rotations both the old and the new app
// secret verify and both webhook secrets sign; endSecretOverlap stops the
// old app secret on another replica within 1 s (the new one keeps
// working) and the next delivery is signed with the new webhook secret
// alone.
func TestEndSecretOverlap(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		replica := apptest.Start(t, b, func(c *config.Config) {
			c.Database.URL = a.App.Cfg.Database.URL
			c.Auth.MasterKeyB64 = a.App.Cfg.Auth.MasterKeyB64
			// Replicas share their configuration: either may claim the delivery.
			c.Webhooks.AllowPrivate = true
		})
		sink := newHookSink(t)
		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Leaky", "appKey": "leaky", "callbackURL": sink.srv.URL + "/h"}}).ok(t, "createPartnerApp")
		id, oldSecret := str(p, "app", "id"), str(p, "appSecret")
		a.gql(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "EO-1", amount: "1"}) { id } }`, map[string]any{"app": id}).ok(t, "createOrder")
		newSecret := str(a.gql(t, `mutation($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret } }`, map[string]any{"id": id}).ok(t, "rotatePartnerAppSecret"), "appSecret")
		newHook := str(a.gql(t, `mutation($id: ID!) { rotateWebhookSecret(id: $id) { webhookSecret } }`, map[string]any{"id": id}).ok(t, "rotateWebhookSecret"), "webhookSecret")
		ctx := context.Background()
		oldClient := partnerclient.New(replica.PublicURL, "leaky", oldSecret)
		newClient := partnerclient.New(replica.PublicURL, "leaky", newSecret)
		for _, c := range []*partnerclient.Client{oldClient, newClient} {
			if _, err := c.OrderV1(ctx, "EO-1"); err != nil {
				t.Fatalf("during the overlap: %v", err)
			}
		}
		a.gql(t, `mutation { payOrder(orderNo: "EO-1") { id } }`, nil).ok(t, "payOrder")
		req, _ := sink.waitFor(t, "EO-1")
		if n := len(strings.Fields(req.Header.Get("webhook-signature"))); n != 2 {
			t.Fatalf("during the overlap a delivery carries %d signatures, want 2", n)
		}

		e := a.gql(t, `mutation($id: ID!) { endSecretOverlap(id: $id) { id previousSecretExpiresAt previousWebhookSecretExpiresAt } }`, map[string]any{"id": id}).ok(t, "endSecretOverlap")
		if dig(e, "previousSecretExpiresAt") != nil || dig(e, "previousWebhookSecretExpiresAt") != nil {
			t.Fatalf("endSecretOverlap: %v", e)
		}
		ended := time.Now()
		d := func() time.Duration {
			eventually(t, 2*time.Second, "the old secret is refused (4002) on the other replica", func() bool {
				_, err := oldClient.OrderV1(ctx, "EO-1")
				var ae *partnerclient.APIError
				return errors.As(err, &ae) && ae.HTTPStatus == 401 && ae.Code == 4002
			})
			return time.Since(ended)
		}()
		if d > time.Second {
			t.Fatalf("the old secret still verified %v after endSecretOverlap", d)
		}
		if _, err := newClient.OrderV1(ctx, "EO-1"); err != nil {
			t.Fatalf("the current secret after endSecretOverlap: %v", err)
		}

		// The next delivery is signed with the new webhook secret alone,
		// on whichever replica claims it: the other replica's copy of the
		// app's webhook secrets may be up to dispatch.AppTTL old.
		time.Sleep(time.Until(ended.Add(dispatch.AppTTL + 50*time.Millisecond)))
		a.gql(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "EO-2", amount: "1"}) { id } }`, map[string]any{"app": id}).ok(t, "createOrder")
		a.gql(t, `mutation { payOrder(orderNo: "EO-2") { id } }`, nil).ok(t, "payOrder")
		req, body := sink.waitFor(t, "EO-2")
		ts, err := strconv.ParseInt(req.Header.Get("webhook-timestamp"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		want := sender.Sign(req.Header.Get("webhook-id"), time.Unix(ts, 0), body, newHook)
		if got := req.Header.Get("webhook-signature"); got != want {
			t.Fatalf("after endSecretOverlap the delivery is signed %q, want the new secret's alone %q", got, want)
		}

		// No overlap: nothing to end, no error. Unknown app: NOT_FOUND.
		a.gql(t, `mutation($id: ID!) { endSecretOverlap(id: $id) { id } }`, map[string]any{"id": id}).ok(t, "endSecretOverlap")
		a.gql(t, `mutation { endSecretOverlap(id: 777777) { id } }`, nil).fails(t, "NOT_FOUND")
	})
}

// TestAuditLog: successful and refused mutations are recorded with the
// key, the mutation, the target and the outcome; auditEvents filters and
// orders; no mutation changes or deletes events.
func TestAuditLog(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		key, err := a.App.APIKeys.Authenticate(context.Background(), a.Key)
		if err != nil {
			t.Fatal(err)
		}
		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Audited"}}).ok(t, "createPartnerApp")
		appID := str(p, "app", "id")
		a.gql(t, `mutation($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret } }`, map[string]any{"id": appID}).ok(t, "rotatePartnerAppSecret")
		a.gql(t, `mutation { rotatePartnerAppSecret(id: 424242) { appSecret } }`, nil).fails(t, "NOT_FOUND")
		a.gql(t, `mutation { createSku(input: {name: "", stock: 1}) { id } }`, nil).fails(t, "VALIDATION_FAILED")
		a.gql(t, `mutation { updatePartnerApp(id: "not-a-number", input: {appName: "x"}) { id } }`, nil).fails(t, "VALIDATION_FAILED")
		a.gql(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "AU-1", amount: "1"}) { id } }`, map[string]any{"app": appID}).ok(t, "createOrder")
		a.gql(t, `mutation { payOrder(orderNo: "AU-1") { id } }`, nil).ok(t, "payOrder")
		a.gql(t, `mutation { payOrder(orderNo: "AU-1") { id } }`, nil).fails(t, "INVALID_STATE")
		n := a.gql(t, `mutation($app: ID) { resendFailedWebhookDeliveries(appID: $app) }`, map[string]any{"app": appID})
		if len(n.Errors) > 0 {
			t.Fatal(n.Body)
		}
		// The app has no callback URL: the test webhook is refused, its target is the app.
		a.gql(t, `mutation($app: ID!) { sendTestWebhook(appID: $app) { id } }`, map[string]any{"app": appID}).fails(t, "INVALID_STATE")
		ro := a.gql(t, `mutation { createAPIKey(name: "viewer", role: READ_ONLY) { key apiKey { id } } }`, nil).ok(t, "createAPIKey")
		gqlAs(t, a.Env, str(ro, "key"), `mutation { createSku(input: {name: "mug", stock: 1}) { id } }`, nil).fails(t, "FORBIDDEN")

		const q = `query($where: AuditEventWhereInput) { auditEvents(first: 50, where: $where, orderBy: {field: TIME, direction: ASC}) {
			totalCount edges { node { id time apiKeyID apiKeyName mutation targetType targetID outcome errorCode requestID } } } }`
		r := a.gql(t, q, nil).ok(t, "auditEvents")
		type ev struct {
			APIKeyID                                   int `json:"apiKeyID,string"` // an ID: a JSON string
			APIKeyName, Mutation, TargetType, TargetID string
			Outcome, ErrorCode, RequestID, Time        string
		}
		var got []ev
		for _, e := range dig(r, "edges").([]any) {
			var x ev
			if err := remarshal(dig(e, "node"), &x); err != nil {
				t.Fatal(err)
			}
			got = append(got, x)
		}
		roID := intID(t, ro, "apiKey", "id")
		want := []ev{
			{key.ID, "test", "createPartnerApp", "PartnerApp", appID, "SUCCESS", "", "", ""},
			{key.ID, "test", "rotatePartnerAppSecret", "PartnerApp", appID, "SUCCESS", "", "", ""},
			{key.ID, "test", "rotatePartnerAppSecret", "PartnerApp", "424242", "REFUSED", "NOT_FOUND", "", ""},
			{key.ID, "test", "createSku", "Sku", "", "REFUSED", "VALIDATION_FAILED", "", ""},
			{key.ID, "test", "updatePartnerApp", "PartnerApp", "not-a-number", "REFUSED", "VALIDATION_FAILED", "", ""},
			{key.ID, "test", "createOrder", "Order", "", "SUCCESS", "", "", ""},
			{key.ID, "test", "payOrder", "Order", "AU-1", "SUCCESS", "", "", ""},
			{key.ID, "test", "payOrder", "Order", "AU-1", "REFUSED", "INVALID_STATE", "", ""},
			{key.ID, "test", "resendFailedWebhookDeliveries", "PartnerApp", appID, "SUCCESS", "", "", ""},
			{key.ID, "test", "sendTestWebhook", "PartnerApp", appID, "REFUSED", "INVALID_STATE", "", ""},
			{key.ID, "test", "createAPIKey", "APIKey", strconv.Itoa(roID), "SUCCESS", "", "", ""},
			{roID, "viewer", "createSku", "Sku", "", "REFUSED", "FORBIDDEN", "", ""},
		}
		if len(got) != len(want) || num(r, "totalCount") != len(want) {
			t.Fatalf("%d audit events, want %d: %s", len(got), len(want), mustJSON(got))
		}
		var last time.Time
		for i, g := range got {
			w := want[i]
			if w.Mutation == "createOrder" && g.TargetID != "" {
				w.TargetID = g.TargetID // the new order's id, checked below
			}
			tm, err := time.Parse(time.RFC3339Nano, g.Time)
			if err != nil || tm.Before(last) || time.Since(tm) > time.Minute || g.RequestID == "" {
				t.Fatalf("event %d: time %q request id %q", i, g.Time, g.RequestID)
			}
			last = tm
			g.Time, g.RequestID = "", ""
			if g != w {
				t.Fatalf("event %d:\n got %+v\nwant %+v", i, g, w)
			}
		}
		if got[5].TargetID == "" {
			t.Fatal("a created order's id is not in its audit event")
		}

		// where and orderBy.
		f := a.gql(t, q, map[string]any{"where": map[string]any{"outcome": "REFUSED", "errorCodeIn": []string{"FORBIDDEN", "INVALID_STATE"}}}).ok(t, "auditEvents")
		if num(f, "totalCount") != 3 || str(f, "edges", 0, "node", "mutation") != "payOrder" || str(f, "edges", 1, "node", "mutation") != "sendTestWebhook" ||
			str(f, "edges", 2, "node", "apiKeyName") != "viewer" {
			t.Fatalf("filtered: %v", f)
		}
		f = a.gql(t, `{ auditEvents(first: 1, where: {mutation: "rotatePartnerAppSecret"}, orderBy: {field: TIME, direction: DESC}) { edges { node { targetID } } } }`, nil).ok(t, "auditEvents")
		if str(f, "edges", 0, "node", "targetID") != "424242" {
			t.Fatalf("newest rotation first: %v", f)
		}

		// Nothing in the API changes or deletes audit events.
		ms := introspectMutations(t, a, a.Key)
		for _, m := range ms.Mutations {
			if strings.Contains(strings.ToLower(m.Name), "audit") {
				t.Fatalf("mutation %s touches the audit log", m.Name)
			}
		}
		if ty, ok := ms.Types["AuditEvent"]; !ok || len(ty.Fields) < 9 {
			t.Fatalf("AuditEvent type: %+v", ty)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestJSONFields: stored JSON text is also shown as a JSON value; text
// that is not JSON is null there.
func TestJSONFields(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "text") {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, "thanks, not JSON")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"received": true, "big": 12345678901234567890}`)
		}))
		t.Cleanup(sink.Close)
		for _, c := range []struct{ key, path string }{{"json-ack", "/json"}, {"text-ack", "/text"}} {
			p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": c.key, "appKey": c.key, "callbackURL": sink.URL + c.path}}).ok(t, "createPartnerApp")
			a.gql(t, `mutation($app: ID!, $no: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: "1"}) { id } }`,
				map[string]any{"app": str(p, "app", "id"), "no": "J-" + c.key}).ok(t, "createOrder")
			a.gql(t, `mutation($no: String!) { payOrder(orderNo: $no) { id } }`, map[string]any{"no": "J-" + c.key}).ok(t, "payOrder")
		}
		const q = `{ webhookDeliveries(where: {status: SUCCESS}, orderBy: {field: CREATE_TIME, direction: ASC}) { edges { node { bizData bizDataJSON
			attempts(first: 1) { edges { node { requestHeaders requestHeadersJSON requestBody requestBodyJSON responseBody responseBodyJSON responseHeadersJSON } } } } } } }`
		var r map[string]any
		eventually(t, 10*time.Second, "both deliveries succeed", func() bool {
			r = a.gql(t, q, nil).ok(t, "webhookDeliveries")
			return len(dig(r, "edges").([]any)) == 2
		})
		js := dig(r, "edges", 0, "node")
		if dig(js, "bizDataJSON", "order_no") != "J-json-ack" {
			t.Fatalf("bizDataJSON: %v (bizData %q)", dig(js, "bizDataJSON"), str(js, "bizData"))
		}
		at := dig(js, "attempts", "edges", 0, "node")
		if dig(at, "requestBodyJSON", "eventType") != "order.paid" || dig(at, "requestBodyJSON", "maxRetry") != float64(5) {
			t.Fatalf("requestBodyJSON: %v", dig(at, "requestBodyJSON"))
		}
		if _, ok := dig(at, "requestHeadersJSON").(map[string]any); !ok || !strings.Contains(mustJSON(dig(at, "requestHeadersJSON")), "webhook-id") &&
			!strings.Contains(mustJSON(dig(at, "requestHeadersJSON")), "Webhook-Id") {
			t.Fatalf("requestHeadersJSON: %v", dig(at, "requestHeadersJSON"))
		}
		if dig(at, "responseBodyJSON", "received") != true || !strings.Contains(mustJSON(dig(at, "responseHeadersJSON")), "application/json") {
			t.Fatalf("responseBodyJSON: %v %v", dig(at, "responseBodyJSON"), dig(at, "responseHeadersJSON"))
		}
		// The raw response carries the big number as sent, not rounded.
		raw := a.gql(t, q, nil)
		if !strings.Contains(raw.Body, `"big":12345678901234567890`) {
			t.Fatalf("a big number was not passed through: %s", raw.Body)
		}
		text := dig(r, "edges", 1, "node", "attempts", "edges", 0, "node")
		if str(text, "responseBody") != "thanks, not JSON" || dig(text, "responseBodyJSON") != nil {
			t.Fatalf("text reply: %q → %v", str(text, "responseBody"), dig(text, "responseBodyJSON"))
		}
	})
}
