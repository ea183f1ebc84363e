package graph_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/graph/graphtest"
	"gatehouse/internal/apikey"
	"gatehouse/internal/testenv"
)

// TestEndpointHealth: WebhookEndpoint.health counts the last 24 h of an
// endpoint's attempts (2xx succeeded, anything else failed) hour by hour,
// leaves out older attempts and other endpoints', and names the latest
// failure; an endpoint without attempts has a null success rate.
func TestEndpointHealth(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		ctx := context.Background()
		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "health"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		appID := graphtest.Str(app, "app", "id")
		mk := func(url string) int {
			r := a.GQL(t, `mutation($app: ID!, $url: String!) { createWebhookEndpoint(appID: $app, input: {url: $url}) { endpoint { id } } }`,
				map[string]any{"app": appID, "url": url}).OK(t, "createWebhookEndpoint")
			id, _ := strconv.Atoi(graphtest.Str(r, "endpoint", "id"))
			return id
		}
		ep, other := mk("https://one.example.com/h"), mk("https://two.example.com/h")
		appNo, _ := strconv.Atoi(appID)
		c := a.App.DB.Client
		now := time.Now()
		attempt := func(endpoint int, ago time.Duration, status int, errText string) {
			t.Helper()
			d, err := c.WebhookDelivery.Create().SetAppID(appNo).SetEndpointID(endpoint).SetEventID("evt-" + strconv.FormatInt(now.Add(-ago).UnixNano(), 36) + strconv.Itoa(endpoint)).
				SetEventType("order.paid").SetBizData("{}").SetCallbackURL("https://x.example.com").SetStatus(webhookdelivery.StatusFAILED).Save(ctx)
			if err != nil {
				t.Fatal(err)
			}
			q := c.DeliveryAttempt.Create().SetDeliveryID(d.ID).SetAttemptNo(1).SetRequestHeaders("{}").SetRequestBody("{}").
				SetDurationMs(5).SetStartedAt(now.Add(-ago))
			if status != 0 {
				q.SetResponseStatus(status)
			}
			if errText != "" {
				q.SetError(errText)
			}
			if _, err := q.Save(ctx); err != nil {
				t.Fatal(err)
			}
		}
		attempt(ep, 30*time.Minute, 200, "")
		attempt(ep, 90*time.Minute, 204, "")
		attempt(ep, 3*time.Hour, 503, "")
		attempt(ep, 2*time.Hour, 0, "timeout after 10s")
		attempt(ep, 30*time.Hour, 500, "") // outside the window (and older than the latest failure)
		attempt(other, 10*time.Minute, 500, "")

		const q = `query($app: ID!) { partnerApps(where: {id: $app}) { edges { node { webhookEndpoints {
			id health { successRate succeeded failed lastError lastErrorAt hours { start succeeded failed } } } } } } }`
		health := func(id int) map[string]any {
			t.Helper()
			r := a.GQL(t, q, map[string]any{"app": appID}).OK(t, "partnerApps")
			for _, e := range graphtest.Dig(r, "edges", 0, "node", "webhookEndpoints").([]any) {
				if graphtest.Str(e, "id") == strconv.Itoa(id) {
					return graphtest.Dig(e, "health").(map[string]any)
				}
			}
			t.Fatalf("no endpoint %d in %v", id, r)
			return nil
		}
		h := health(ep)
		if graphtest.Num(h, "succeeded") != 2 || graphtest.Num(h, "failed") != 2 || graphtest.Dig(h, "successRate") != 0.5 {
			t.Fatalf("health %v: want 2 succeeded, 2 failed, rate 0.5", h)
		}
		if graphtest.Str(h, "lastError") != "timeout after 10s" {
			t.Fatalf("lastError %v, want the timeout (the latest failure)", h["lastError"])
		}
		hours := h["hours"].([]any)
		if len(hours) != 24 {
			t.Fatalf("%d hours, want 24", len(hours))
		}
		// Each attempt sits in the hour that holds its start; the sums are
		// the totals (the attempt 30 h ago is in none).
		var good, bad int
		for _, hr := range hours {
			start, err := time.Parse(time.RFC3339, graphtest.Str(hr, "start"))
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, ago := range []time.Duration{30 * time.Minute, 90 * time.Minute} {
				if at := now.Add(-ago); !at.Before(start) && at.Before(start.Add(time.Hour)) {
					want++
				}
			}
			if graphtest.Num(hr, "succeeded") != want {
				t.Fatalf("hour %v: %d succeeded, want %d (%v)", start, graphtest.Num(hr, "succeeded"), want, hours)
			}
			good += graphtest.Num(hr, "succeeded")
			bad += graphtest.Num(hr, "failed")
		}
		if good != 2 || bad != 2 || !strings.HasPrefix(graphtest.Str(hours[23], "start"), now.UTC().Truncate(time.Hour).Format("2006-01-02T15")) {
			t.Fatalf("hours %v: want 2 succeeded and 2 failed, the last hour the current one", hours)
		}
		none := mk("https://three.example.com/h")
		h = health(none)
		if h["successRate"] != nil || h["lastError"] != nil || graphtest.Num(h, "failed") != 0 {
			t.Fatalf("an endpoint without attempts: %v", h)
		}
	})
}

// TestViewer: viewer is the key the request is made with, so that a client
// can show a READ_ONLY key no buttons.
func TestViewer(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		_, ro, err := a.App.APIKeys.Create(context.Background(), "reader", apikey.RoleReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		v := graphtest.GQLAs(t, a.Env, ro, `{ viewer { name role } }`, nil).OK(t, "viewer")
		if graphtest.Str(v, "name") != "reader" || graphtest.Str(v, "role") != "READ_ONLY" {
			t.Fatalf("viewer %v", v)
		}
		if v := a.GQL(t, `{ viewer { name role } }`, nil).OK(t, "viewer"); graphtest.Str(v, "role") != "ADMIN" {
			t.Fatalf("viewer %v", v)
		}
	})
}
