package webhook_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

const createApp = `mutation($in: CreatePartnerAppInput!) { createPartnerApp(input: $in) { app { id appKey } webhookSecret } }`

// TestOperatorControlThroughGraphQL: sendTestWebhook, cancelWebhookDelivery,
// payOrder's warnings and PartnerApp.webhookBreaker, from the admin API.
func TestOperatorControlThroughGraphQL(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b, func(c *config.Config) {
			c.Auth.BootstrapAPIKey = adminKey
			c.Webhooks.AllowPrivate = true
			c.Webhooks.RetryBase = time.Hour // the first attempts only
		})
		rcv := newReceiver(t, always(http.StatusOK))
		newApp := func(name, callback string) (id, secret string) {
			in := map[string]any{"appName": name}
			if callback != "" {
				in["callbackURL"] = callback
			}
			d := mustGQL(t, e, createApp, map[string]any{"in": in})
			return path(d, "createPartnerApp", "app", "id").(string), path(d, "createPartnerApp", "webhookSecret").(string)
		}

		// sendTestWebhook: a signed webhook.test arrives.
		appID, secret := newApp("tested", rcv.URL+"/hook")
		d := mustGQL(t, e, `mutation($app: ID!) { sendTestWebhook(appID: $app) { id eventType status } }`, map[string]any{"app": appID})
		if path(d, "sendTestWebhook", "eventType") != "webhook.test" || path(d, "sendTestWebhook", "status") != "PENDING" {
			t.Fatalf("sendTestWebhook: %v", d)
		}
		waitFor(t, 10*time.Second, func() bool { return rcv.count() == 1 }, func() string { return "no test webhook arrived" })
		wh, _ := standardwebhooks.NewWebhook(secret)
		if r := rcv.requests()[0]; wh.Verify(r.body, r.header) != nil || message(t, r.body).EventType != "webhook.test" {
			t.Fatalf("test webhook %s does not verify", r.body)
		}
		bare, _ := newApp("no callback", "")
		if r := gql(t, e, `mutation($app: ID!) { sendTestWebhook(appID: $app) { id } }`, map[string]any{"app": bare}); r.code() != "INVALID_STATE" || !strings.Contains(r.Errors[0].Message, "callback URL") {
			t.Errorf("sendTestWebhook without a callback URL: %+v", r.Errors)
		}
		if r := gql(t, e, `mutation { sendTestWebhook(appID: 424242) { id } }`, nil); r.code() != "NOT_FOUND" {
			t.Errorf("sendTestWebhook of an unknown app: %+v", r.Errors)
		}

		// payOrder warns when no webhook goes out at once.
		pay := func(app, no string) gqlResult {
			mustGQL(t, e, `mutation($app: ID!, $no: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: "1"}) { id } }`, map[string]any{"app": app, "no": no})
			return gql(t, e, `mutation($no: String!) { payOrder(orderNo: $no) { status } }`, map[string]any{"no": no})
		}
		r := pay(bare, "W-1")
		if len(r.Errors) > 0 || path(r.Data, "payOrder", "status") != "PAID" ||
			path(r.Extensions, "warnings", "0", "code") != "NO_CALLBACK_URL" || path(r.Extensions, "warnings", "0", "path", "0") != "payOrder" {
			t.Errorf("payOrder without a callback URL: data %v, extensions %v, errors %+v", r.Data, r.Extensions, r.Errors)
		}
		if r := pay(appID, "W-2"); r.Extensions["warnings"] != nil {
			t.Errorf("payOrder with a callback URL warns: %v", r.Extensions)
		}
		held, _ := newApp("held", rcv.URL+"/held")
		mustGQL(t, e, `mutation($id: ID!) { updatePartnerApp(id: $id, input: {status: 0}) { id } }`, map[string]any{"id": held})
		r = pay(held, "W-3")
		if path(r.Extensions, "warnings", "0", "code") != "WEBHOOK_HELD" {
			t.Errorf("payOrder of a disabled app: %v", r.Extensions)
		}

		// cancelWebhookDelivery: the held delivery is cancelled, once.
		const cancel = `mutation($id: ID!) { cancelWebhookDelivery(id: $id) { id status } }`
		d = mustGQL(t, e, `query($app: ID!) { webhookDeliveries(where: {appID: $app}) { edges { node { id status } } } }`, map[string]any{"app": held})
		id := path(d, "webhookDeliveries", "edges", "0", "node", "id")
		if st := path(mustGQL(t, e, cancel, map[string]any{"id": id}), "cancelWebhookDelivery", "status"); st != "CANCELLED" {
			t.Fatalf("cancel: %v", st)
		}
		if r := gql(t, e, cancel, map[string]any{"id": id}); r.code() != "INVALID_STATE" || !strings.Contains(r.Errors[0].Message, "CANCELLED") {
			t.Errorf("cancelling twice: %+v", r.Errors)
		}
		if r := gql(t, e, cancel, map[string]any{"id": "777777"}); r.code() != "NOT_FOUND" {
			t.Errorf("cancelling an unknown delivery: %+v", r.Errors)
		}

		// webhookBreaker: 10 failed attempts open the endpoint's breaker.
		down := newReceiver(t, always(http.StatusInternalServerError))
		broken, _ := newApp("broken", down.URL+"/hook")
		// (At most 5 tests of one app wait at once: the other 5 are orders.)
		for i := range 10 {
			if i < 5 {
				mustGQL(t, e, `mutation($app: ID!) { sendTestWebhook(appID: $app) { id } }`, map[string]any{"app": broken})
			} else if r := pay(broken, fmt.Sprint("B-", i)); len(r.Errors) > 0 {
				t.Fatalf("payOrder: %+v", r.Errors)
			}
		}
		if r := gql(t, e, `mutation($app: ID!) { sendTestWebhook(appID: $app) { id } }`, map[string]any{"app": broken}); r.code() != "CONFLICT" {
			t.Errorf("a 6th waiting test webhook: %+v", r.Errors)
		}
		waitFor(t, 10*time.Second, func() bool { return down.count() == 10 }, func() string { return fmt.Sprint(down.count(), " attempts") })
		const breakers = `query($ids: [ID!]) { partnerApps(where: {idIn: $ids}, orderBy: {field: CREATE_TIME}) { edges { node { id webhookBreaker } } } }`
		waitFor(t, 5*time.Second, func() bool {
			d := mustGQL(t, e, breakers, map[string]any{"ids": []string{appID, broken}})
			return path(d, "partnerApps", "edges", "0", "node", "webhookBreaker") == "CLOSED" &&
				path(d, "partnerApps", "edges", "1", "node", "webhookBreaker") == "OPEN"
		}, func() string {
			return fmt.Sprint(mustGQL(t, e, breakers, map[string]any{"ids": []string{appID, broken}}))
		})
		metrics := string(e.Do(t, http.MethodGet, e.AdminURL+"/metrics", "").Body)
		if !strings.Contains(metrics, `gatehouse_webhook_breaker_state{app="`+broken+`"} 2`) {
			t.Errorf("metrics lack the open breaker of app %s", broken)
		}
	})
}
