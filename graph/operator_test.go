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

	"gatehouse/graph/graphtest"
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
		a := graphtest.StartAdmin(t, b)
		replica := apptest.Start(t, b, func(c *config.Config) {
			c.Database.URL = a.App.Cfg.Database.URL
			c.Auth.MasterKeyB64 = a.App.Cfg.Auth.MasterKeyB64
		})
		k := a.GQL(t, `mutation { createAPIKey(name: "second") { key apiKey { id role } } }`, nil).OK(t, "createAPIKey")
		if graphtest.Str(k, "apiKey", "role") != "ADMIN" {
			t.Fatalf("default role: %v", k)
		}
		id := graphtest.Str(k, "apiKey", "id")
		a.GQL(t, `mutation($id: ID!) { disableAPIKey(id: $id) { status } }`, map[string]any{"id": id}).OK(t, "disableAPIKey")
		if r := graphtest.GQLAs(t, replica, graphtest.Str(k, "key"), `{ apiKeys { totalCount } }`, nil); r.Status != 401 || !strings.Contains(r.Body, "invalid_api_key") {
			t.Fatalf("disabled key: %d %s", r.Status, r.Body)
		}
		e := a.GQL(t, `mutation($id: ID!) { enableAPIKey(id: $id) { id status } }`, map[string]any{"id": id}).OK(t, "enableAPIKey")
		if graphtest.Num(e, "status") != 1 {
			t.Fatalf("enableAPIKey: %v", e)
		}
		graphtest.GQLAs(t, replica, graphtest.Str(k, "key"), `{ apiKeys { totalCount } }`, nil).OK(t, "apiKeys")
		a.GQL(t, `mutation($id: ID!) { enableAPIKey(id: $id) { status } }`, map[string]any{"id": id}).OK(t, "enableAPIKey") // again: no error
		a.GQL(t, `mutation { enableAPIKey(id: 987654) { id } }`, nil).Fails(t, "NOT_FOUND")
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
	graphtest.Eventually(t, 10*time.Second, "the delivery of "+orderNo, func() bool {
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
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		replica := apptest.Start(t, b, func(c *config.Config) {
			c.Database.URL = a.App.Cfg.Database.URL
			c.Auth.MasterKeyB64 = a.App.Cfg.Auth.MasterKeyB64
			// Replicas share their configuration: either may claim the delivery.
			c.Webhooks.AllowPrivate = true
		})
		sink := newHookSink(t)
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Leaky", "appKey": "leaky", "callbackURL": sink.srv.URL + "/h"}}).OK(t, "createPartnerApp")
		id, oldSecret := graphtest.Str(p, "app", "id"), graphtest.Str(p, "appSecret")
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "EO-1", amount: "1"}) { id } }`, map[string]any{"app": id}).OK(t, "createOrder")
		newSecret := graphtest.Str(a.GQL(t, `mutation($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret } }`, map[string]any{"id": id}).OK(t, "rotatePartnerAppSecret"), "appSecret")
		newHook := graphtest.Str(a.GQL(t, `mutation($id: ID!) { rotateWebhookSecret(id: $id) { webhookSecret } }`, map[string]any{"id": id}).OK(t, "rotateWebhookSecret"), "webhookSecret")
		ctx := context.Background()
		oldClient := partnerclient.New(replica.PublicURL, "leaky", oldSecret)
		newClient := partnerclient.New(replica.PublicURL, "leaky", newSecret)
		for _, c := range []*partnerclient.Client{oldClient, newClient} {
			if _, err := c.OrderV1(ctx, "EO-1"); err != nil {
				t.Fatalf("during the overlap: %v", err)
			}
		}
		a.GQL(t, `mutation { payOrder(orderNo: "EO-1") { id } }`, nil).OK(t, "payOrder")
		req, _ := sink.waitFor(t, "EO-1")
		if n := len(strings.Fields(req.Header.Get("webhook-signature"))); n != 2 {
			t.Fatalf("during the overlap a delivery carries %d signatures, want 2", n)
		}

		e := a.GQL(t, `mutation($id: ID!) { endSecretOverlap(id: $id) { id previousSecretExpiresAt previousWebhookSecretExpiresAt } }`, map[string]any{"id": id}).OK(t, "endSecretOverlap")
		if graphtest.Dig(e, "previousSecretExpiresAt") != nil || graphtest.Dig(e, "previousWebhookSecretExpiresAt") != nil {
			t.Fatalf("endSecretOverlap: %v", e)
		}
		ended := time.Now()
		d := func() time.Duration {
			graphtest.Eventually(t, 2*time.Second, "the old secret is refused (4002) on the other replica", func() bool {
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
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "EO-2", amount: "1"}) { id } }`, map[string]any{"app": id}).OK(t, "createOrder")
		a.GQL(t, `mutation { payOrder(orderNo: "EO-2") { id } }`, nil).OK(t, "payOrder")
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
		a.GQL(t, `mutation($id: ID!) { endSecretOverlap(id: $id) { id } }`, map[string]any{"id": id}).OK(t, "endSecretOverlap")
		a.GQL(t, `mutation { endSecretOverlap(id: 777777) { id } }`, nil).Fails(t, "NOT_FOUND")
	})
}

// TestAuditLog: successful and refused mutations are recorded with the
// key, the mutation, the target and the outcome; auditEvents filters and
// orders; no mutation changes or deletes events.
func TestAuditLog(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		key, err := a.App.APIKeys.Authenticate(context.Background(), a.Key)
		if err != nil {
			t.Fatal(err)
		}
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Audited"}}).OK(t, "createPartnerApp")
		appID := graphtest.Str(p, "app", "id")
		a.GQL(t, `mutation($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret } }`, map[string]any{"id": appID}).OK(t, "rotatePartnerAppSecret")
		a.GQL(t, `mutation { rotatePartnerAppSecret(id: 424242) { appSecret } }`, nil).Fails(t, "NOT_FOUND")
		a.GQL(t, `mutation { createSku(input: {name: "", stock: 1}) { id } }`, nil).Fails(t, "VALIDATION_FAILED")
		a.GQL(t, `mutation { updatePartnerApp(id: "not-a-number", input: {appName: "x"}) { id } }`, nil).Fails(t, "VALIDATION_FAILED")
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "AU-1", amount: "1"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		a.GQL(t, `mutation { payOrder(orderNo: "AU-1") { id } }`, nil).OK(t, "payOrder")
		a.GQL(t, `mutation { payOrder(orderNo: "AU-1") { id } }`, nil).Fails(t, "INVALID_STATE")
		n := a.GQL(t, `mutation($app: ID) { resendFailedWebhookDeliveries(appID: $app) }`, map[string]any{"app": appID})
		if len(n.Errors) > 0 {
			t.Fatal(n.Body)
		}
		// The app has no callback URL: the test webhook is refused, its target is the app.
		a.GQL(t, `mutation($app: ID!) { sendTestWebhook(appID: $app) { id } }`, map[string]any{"app": appID}).Fails(t, "INVALID_STATE")
		ro := a.GQL(t, `mutation { createAPIKey(name: "viewer", role: READ_ONLY) { key apiKey { id } } }`, nil).OK(t, "createAPIKey")
		graphtest.GQLAs(t, a.Env, graphtest.Str(ro, "key"), `mutation { createSku(input: {name: "mug", stock: 1}) { id } }`, nil).Fails(t, "FORBIDDEN")

		const q = `query($where: AuditEventWhereInput) { auditEvents(first: 50, where: $where, orderBy: {field: TIME, direction: ASC}) {
			totalCount edges { node { id time apiKeyID apiKeyName mutation targetType targetID outcome errorCode requestID } } } }`
		r := a.GQL(t, q, nil).OK(t, "auditEvents")
		type ev struct {
			APIKeyID                                   int `json:"apiKeyID,string"` // an ID: a JSON string
			APIKeyName, Mutation, TargetType, TargetID string
			Outcome, ErrorCode, RequestID, Time        string
		}
		var got []ev
		for _, e := range graphtest.Dig(r, "edges").([]any) {
			var x ev
			if err := graphtest.Remarshal(graphtest.Dig(e, "node"), &x); err != nil {
				t.Fatal(err)
			}
			got = append(got, x)
		}
		roID := graphtest.IntID(t, ro, "apiKey", "id")
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
		if len(got) != len(want) || graphtest.Num(r, "totalCount") != len(want) {
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
		f := a.GQL(t, q, map[string]any{"where": map[string]any{"outcome": "REFUSED", "errorCodeIn": []string{"FORBIDDEN", "INVALID_STATE"}}}).OK(t, "auditEvents")
		if graphtest.Num(f, "totalCount") != 3 || graphtest.Str(f, "edges", 0, "node", "mutation") != "payOrder" || graphtest.Str(f, "edges", 1, "node", "mutation") != "sendTestWebhook" ||
			graphtest.Str(f, "edges", 2, "node", "apiKeyName") != "viewer" {
			t.Fatalf("filtered: %v", f)
		}
		f = a.GQL(t, `{ auditEvents(first: 1, where: {mutation: "rotatePartnerAppSecret"}, orderBy: {field: TIME, direction: DESC}) { edges { node { targetID } } } }`, nil).OK(t, "auditEvents")
		if graphtest.Str(f, "edges", 0, "node", "targetID") != "424242" {
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
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
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
			p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": c.key, "appKey": c.key, "callbackURL": sink.URL + c.path}}).OK(t, "createPartnerApp")
			a.GQL(t, `mutation($app: ID!, $no: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: "1"}) { id } }`,
				map[string]any{"app": graphtest.Str(p, "app", "id"), "no": "J-" + c.key}).OK(t, "createOrder")
			a.GQL(t, `mutation($no: String!) { payOrder(orderNo: $no) { id } }`, map[string]any{"no": "J-" + c.key}).OK(t, "payOrder")
		}
		const q = `{ webhookDeliveries(where: {status: SUCCESS}, orderBy: {field: CREATE_TIME, direction: ASC}) { edges { node { bizData bizDataJSON
			attempts(first: 1) { edges { node { requestHeaders requestHeadersJSON requestBody requestBodyJSON responseBody responseBodyJSON responseHeadersJSON } } } } } } }`
		var r map[string]any
		graphtest.Eventually(t, 10*time.Second, "both deliveries succeed", func() bool {
			r = a.GQL(t, q, nil).OK(t, "webhookDeliveries")
			return len(graphtest.Dig(r, "edges").([]any)) == 2
		})
		js := graphtest.Dig(r, "edges", 0, "node")
		if graphtest.Dig(js, "bizDataJSON", "order_no") != "J-json-ack" {
			t.Fatalf("bizDataJSON: %v (bizData %q)", graphtest.Dig(js, "bizDataJSON"), graphtest.Str(js, "bizData"))
		}
		at := graphtest.Dig(js, "attempts", "edges", 0, "node")
		if graphtest.Dig(at, "requestBodyJSON", "eventType") != "order.paid" || graphtest.Dig(at, "requestBodyJSON", "maxRetry") != float64(5) {
			t.Fatalf("requestBodyJSON: %v", graphtest.Dig(at, "requestBodyJSON"))
		}
		if _, ok := graphtest.Dig(at, "requestHeadersJSON").(map[string]any); !ok || !strings.Contains(mustJSON(graphtest.Dig(at, "requestHeadersJSON")), "webhook-id") &&
			!strings.Contains(mustJSON(graphtest.Dig(at, "requestHeadersJSON")), "Webhook-Id") {
			t.Fatalf("requestHeadersJSON: %v", graphtest.Dig(at, "requestHeadersJSON"))
		}
		if graphtest.Dig(at, "responseBodyJSON", "received") != true || !strings.Contains(mustJSON(graphtest.Dig(at, "responseHeadersJSON")), "application/json") {
			t.Fatalf("responseBodyJSON: %v %v", graphtest.Dig(at, "responseBodyJSON"), graphtest.Dig(at, "responseHeadersJSON"))
		}
		// The raw response carries the big number as sent, not rounded.
		raw := a.GQL(t, q, nil)
		if !strings.Contains(raw.Body, `"big":12345678901234567890`) {
			t.Fatalf("a big number was not passed through: %s", raw.Body)
		}
		text := graphtest.Dig(r, "edges", 1, "node", "attempts", "edges", 0, "node")
		if graphtest.Str(text, "responseBody") != "thanks, not JSON" || graphtest.Dig(text, "responseBodyJSON") != nil {
			t.Fatalf("text reply: %q → %v", graphtest.Str(text, "responseBody"), graphtest.Dig(text, "responseBodyJSON"))
		}
	})
}
