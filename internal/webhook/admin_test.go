package webhook_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

const adminKey = "test-admin-key-0123456789abcdef"

// gqlResult is a GraphQL response.
type gqlResult struct {
	Data       map[string]any `json:"data"`
	Extensions map[string]any `json:"extensions"`
	Errors     []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func (r gqlResult) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// gql runs a query on the admin listener with the bootstrap API key.
func gql(t *testing.T, e *apptest.Env, query string, vars map[string]any) gqlResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	r := e.Do(t, http.MethodPost, e.AdminURL+"/graphql", string(body), "Content-Type", "application/json", "X-API-Key", adminKey)
	var out gqlResult
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("GraphQL reply %d %s: %v", r.Status, r.Body, err)
	}
	return out
}

// mustGQL runs a query that must succeed and returns its data.
func mustGQL(t *testing.T, e *apptest.Env, query string, vars map[string]any) map[string]any {
	t.Helper()
	r := gql(t, e, query, vars)
	if len(r.Errors) > 0 {
		t.Fatalf("GraphQL errors %+v for %s", r.Errors, query)
	}
	return r.Data
}

// path walks decoded JSON: keys of objects, indexes of arrays.
func path(v any, keys ...string) any {
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, _ := strconv.Atoi(k)
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

const deliveriesQuery = `query($where: WebhookDeliveryWhereInput) {
  webhookDeliveries(first: 10, where: $where) {
    totalCount
    edges { node {
      id status retryCount maxRetry eventType eventID callbackURL lastError
      attempts(first: 20) { totalCount edges { node {
        attemptNo responseStatus requestHeaders requestBody responseBody error durationMs
      } } }
    } }
  }
}`

// The whole flow through the front doors, on both backends: an app and an
// order made in GraphQL, payOrder, the webhook arriving signed, failing
// until the receiver is fixed, FAILED visible with its attempts and the
// alert metric, then resent from GraphQL.
func TestAdminFlowThroughGraphQL(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var healthy atomic.Bool
		rcv := newReceiver(t, func(int) int {
			if healthy.Load() {
				return http.StatusOK
			}
			return http.StatusGone
		})
		e := apptest.Start(t, b, func(c *config.Config) {
			c.Webhooks.AllowPrivate = true
			c.Webhooks.RetryBase = 5 * time.Millisecond
			c.Auth.BootstrapAPIKey = adminKey
		})

		d := mustGQL(t, e, `mutation($url: String) {
		  createPartnerApp(input: {appName: "Shop", callbackURL: $url}) { app { id } webhookSecret }
		}`, map[string]any{"url": rcv.URL + "/hook"})
		appID := path(d, "createPartnerApp", "app", "id")
		whsec, _ := path(d, "createPartnerApp", "webhookSecret").(string)
		for _, no := range []string{"SO-A", "SO-B"} {
			mustGQL(t, e, `mutation($app: ID!, $no: String!) {
			  createOrder(input: {appID: $app, orderNo: $no, amount: "99.90"}) { id }
			}`, map[string]any{"app": appID, "no": no})
		}

		d = mustGQL(t, e, `mutation { payOrder(orderNo: "SO-A") { status payTime } }`, nil)
		if path(d, "payOrder", "status") != "PAID" || path(d, "payOrder", "payTime") == nil {
			t.Fatalf("payOrder = %v", d)
		}
		if r := gql(t, e, `mutation { payOrder(orderNo: "SO-A") { status } }`, nil); r.code() != "INVALID_STATE" {
			t.Errorf("paying twice: %+v, want INVALID_STATE", r.Errors)
		}
		if r := gql(t, e, `mutation { payOrder(orderNo: "SO-none") { status } }`, nil); r.code() != "NOT_FOUND" {
			t.Errorf("paying an unknown order: %+v, want NOT_FOUND", r.Errors)
		}

		// Six attempts, all 410: FAILED, visible with its attempts.
		failedWhere := map[string]any{"where": map[string]any{"status": "FAILED", "appID": appID, "eventType": "order.paid"}}
		var failed map[string]any
		waitFor(t, 15*time.Second, func() bool {
			failed = mustGQL(t, e, deliveriesQuery, failedWhere)
			return path(failed, "webhookDeliveries", "totalCount") == 1.0
		}, func() string { return "no FAILED delivery listed" })
		node := path(failed, "webhookDeliveries", "edges", "0", "node")
		if path(node, "retryCount") != 5.0 || path(node, "maxRetry") != 5.0 || path(node, "lastError") != "HTTP 410 Gone" ||
			path(node, "callbackURL") != rcv.URL+"/hook" {
			t.Errorf("FAILED delivery = %v", node)
		}
		if n := path(node, "attempts", "totalCount"); n != 6.0 {
			t.Fatalf("attempts totalCount = %v, want 6", n)
		}
		att := path(node, "attempts", "edges", "5", "node")
		if path(att, "attemptNo") != 6.0 || path(att, "responseStatus") != 410.0 || path(att, "responseBody") != `{"n":6}` ||
			!strings.Contains(path(att, "requestBody").(string), `"retryCount":5`) ||
			!strings.Contains(path(att, "requestHeaders").(string), "v1,[redacted]") {
			t.Errorf("6th attempt = %v", att)
		}
		reqs := rcv.requests()
		wh, err := standardwebhooks.NewWebhook(whsec)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(reqs[0].body, reqs[0].header); err != nil {
			t.Errorf("the webhook secret from createPartnerApp does not verify: %v", err)
		}

		// The alert metric is exposed.
		m := e.Do(t, http.MethodGet, e.AdminURL+"/metrics", "")
		if !strings.Contains(string(m.Body), `gatehouse_webhook_deliveries_failed_total{event_type="order.paid"}`) {
			t.Errorf("/metrics lacks the failed-delivery counter")
		}

		// Resend one delivery.
		healthy.Store(true)
		id := path(node, "id")
		d = mustGQL(t, e, `mutation($id: ID!) { resendWebhookDelivery(id: $id) { id retryCount } }`, map[string]any{"id": id})
		if path(d, "resendWebhookDelivery", "id") != id || path(d, "resendWebhookDelivery", "retryCount") != 0.0 {
			t.Errorf("resendWebhookDelivery = %v", d)
		}
		okWhere := map[string]any{"where": map[string]any{"status": "SUCCESS", "id": id}}
		waitFor(t, 10*time.Second, func() bool {
			return path(mustGQL(t, e, deliveriesQuery, okWhere), "webhookDeliveries", "totalCount") == 1.0
		}, func() string { return "the resent delivery did not succeed" })
		got := mustGQL(t, e, deliveriesQuery, okWhere)
		if n := path(got, "webhookDeliveries", "edges", "0", "node", "attempts", "totalCount"); n != 7.0 {
			t.Errorf("attempts after resend = %v, want 7", n)
		}
		if r := gql(t, e, `mutation { resendWebhookDelivery(id: 999999) { id } }`, nil); r.code() != "NOT_FOUND" {
			t.Errorf("resending an unknown delivery: %+v, want NOT_FOUND", r.Errors)
		}

		// Resend every failed delivery of the app.
		healthy.Store(false)
		mustGQL(t, e, `mutation { payOrder(orderNo: "SO-B") { status } }`, nil)
		waitFor(t, 15*time.Second, func() bool {
			return path(mustGQL(t, e, deliveriesQuery, failedWhere), "webhookDeliveries", "totalCount") == 1.0
		}, func() string { return "the second delivery did not fail" })
		healthy.Store(true)
		d = mustGQL(t, e, `mutation($app: ID) { resendFailedWebhookDeliveries(appID: $app) }`, map[string]any{"app": appID})
		if n := path(d, "resendFailedWebhookDeliveries"); n != 1.0 {
			t.Errorf("resendFailedWebhookDeliveries = %v, want 1", n)
		}
		waitFor(t, 10*time.Second, func() bool {
			r := mustGQL(t, e, deliveriesQuery, map[string]any{"where": map[string]any{"status": "SUCCESS", "appID": appID}})
			return path(r, "webhookDeliveries", "totalCount") == 2.0
		}, func() string { return "resent deliveries did not succeed" })
	})
}

// With the default configuration a private callback URL is refused when
// it is registered; the delivery log needs the admin API key.
func TestAdminRefusesPrivateCallbackByDefault(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b, func(c *config.Config) { c.Auth.BootstrapAPIKey = adminKey })
		// The delivery log is behind the admin API key.
		if r := e.Do(t, http.MethodPost, e.AdminURL+"/graphql", `{"query":"{ webhookDeliveries { totalCount } }"}`,
			"Content-Type", "application/json"); r.Status != http.StatusUnauthorized {
			t.Errorf("delivery log without an API key: %d %s, want 401", r.Status, r.Body)
		}
		for _, u := range []string{"http://127.0.0.1:9/hook", "http://169.254.169.254/latest", "http://localhost/x", "http://[::1]/", "ftp://partner.example.com/"} {
			r := gql(t, e, `mutation($url: String) { createPartnerApp(input: {appName: "x", callbackURL: $url}) { app { id } } }`,
				map[string]any{"url": u})
			if r.code() != "VALIDATION_FAILED" {
				t.Errorf("callback %s: %+v, want VALIDATION_FAILED", u, r.Errors)
			}
		}
	})
}
