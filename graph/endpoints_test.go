package graph_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/graph/graphtest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// TestWebhookEndpointMutations: an operator adds, lists, filters,
// disables, rotates and deletes an app's webhook endpoints over GraphQL;
// bad input is VALIDATION_FAILED naming the field; deleting an endpoint
// cancels its waiting deliveries; PartnerApp.callbackURL speaks for the
// first endpoint.
func TestWebhookEndpointMutations(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		ctx := context.Background()
		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "hooks", callbackURL: "https://first.example.com/h"}) { app { id } webhookSecret } }`, nil).OK(t, "createPartnerApp")
		appID := graphtest.Str(app, "app", "id")
		const list = `query($id: ID!) { partnerApps(where: {id: $id}) { edges { node { callbackURL webhookBreaker
			webhookEndpoints { id url description eventTypes enabled rateLimit previousSecretExpiresAt breaker } } } } }`
		endpoints := func() []any {
			r := a.GQL(t, list, map[string]any{"id": appID}).OK(t, "partnerApps")
			return graphtest.Dig(r, "edges", 0, "node", "webhookEndpoints").([]any)
		}
		eps := endpoints()
		if len(eps) != 1 || graphtest.Str(eps[0], "url") != "https://first.example.com/h" || graphtest.Dig(eps[0], "enabled") != true || graphtest.Str(eps[0], "breaker") != "CLOSED" {
			t.Fatalf("createPartnerApp(callbackURL) made %v, want one enabled endpoint at that URL", eps)
		}
		firstID := graphtest.Str(eps[0], "id")

		created := a.GQL(t, `mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "https://second.example.com/h", description: "billing",
			eventTypes: ["order.refunded", "order.refunded", "invoice.issued"], rateLimit: 50}) { secret endpoint { id url description eventTypes rateLimit enabled } } }`,
			map[string]any{"app": appID}).OK(t, "createWebhookEndpoint")
		secondID := graphtest.Str(created, "endpoint", "id")
		if s := graphtest.Str(created, "secret"); !strings.HasPrefix(s, sender.SecretPrefix) {
			t.Fatalf("secret %q", s)
		}
		if fmt.Sprint(graphtest.Dig(created, "endpoint", "eventTypes")) != "[order.refunded invoice.issued]" || graphtest.Num(created, "endpoint", "rateLimit") != 50 {
			t.Fatalf("created %v", created)
		}

		for _, c := range []struct{ doc, field string }{
			{`mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "ftp://x.example.com"}) { secret } }`, "url"},
			{`mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "http://10.0.0.1/h"}) { secret } }`, "url"},
			{`mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "https://x.example.com", eventTypes: ["Paid!"]}) { secret } }`, "eventTypes"},
			{`mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "https://x.example.com", rateLimit: 0}) { secret } }`, "rateLimit"},
		} {
			e := a.GQL(t, c.doc, map[string]any{"app": appID}).Fails(t, "VALIDATION_FAILED")
			if e.Extensions["field"] != c.field {
				t.Errorf("%s: field %v, want %s", c.doc, e.Extensions["field"], c.field)
			}
		}
		a.GQL(t, `mutation { createWebhookEndpoint(appID: 424242, input: {url: "https://x.example.com"}) { secret } }`, nil).Fails(t, "NOT_FOUND")
		a.GQL(t, `mutation { disableWebhookEndpoint(id: 424242) { id } }`, nil).Fails(t, "NOT_FOUND")

		up := a.GQL(t, `mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: {eventTypes: null, clearRateLimit: true, description: "all"}) { eventTypes rateLimit description } }`,
			map[string]any{"id": secondID}).OK(t, "updateWebhookEndpoint")
		if graphtest.Dig(up, "rateLimit") != nil || len(graphtest.Dig(up, "eventTypes").([]any)) != 0 || graphtest.Str(up, "description") != "all" {
			t.Fatalf("updated %v", up)
		}
		rot := a.GQL(t, `mutation($id: ID!) { rotateWebhookEndpointSecret(id: $id) { secret endpoint { previousSecretExpiresAt } } }`,
			map[string]any{"id": secondID}).OK(t, "rotateWebhookEndpointSecret")
		if graphtest.Str(rot, "secret") == graphtest.Str(created, "secret") || graphtest.Str(rot, "endpoint", "previousSecretExpiresAt") == "" {
			t.Fatalf("rotated %v", rot)
		}
		end := a.GQL(t, `mutation($id: ID!) { endWebhookEndpointSecretOverlap(id: $id) { previousSecretExpiresAt } }`, map[string]any{"id": secondID}).OK(t, "endWebhookEndpointSecretOverlap")
		if graphtest.Dig(end, "previousSecretExpiresAt") != nil {
			t.Fatalf("after endWebhookEndpointSecretOverlap: %v", end)
		}

		// The first endpoint is disabled: an order paid then fans out to the
		// second only (no held copy, no warning). Enabled again, the next
		// order reaches both; deleting the first cancels its delivery.
		if d := a.GQL(t, `mutation($id: ID!) { disableWebhookEndpoint(id: $id) { enabled autoDisabledAt } }`, map[string]any{"id": firstID}).OK(t, "disableWebhookEndpoint"); graphtest.Dig(d, "enabled") != false || graphtest.Dig(d, "autoDisabledAt") != nil {
			t.Fatalf("disabled: %v", d)
		}
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "EP-1", amount: "1"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		paid := a.GQL(t, `mutation { payOrder(orderNo: "EP-1") { id } }`, nil)
		if len(paid.Errors) > 0 || strings.Contains(paid.Body, "WEBHOOK_HELD") {
			t.Fatalf("payOrder with one endpoint disabled: %s, want no warning", paid.Body)
		}
		ds, err := a.App.DB.Client.WebhookDelivery.Query().Where(webhookdelivery.BizDataContains(`"EP-1"`)).All(ctx)
		if err != nil || len(ds) != 1 || ds[0].CallbackURL != "https://second.example.com/h" {
			t.Fatalf("deliveries of the payment with the first endpoint disabled: %v (%v), want the second endpoint's only", ds, err)
		}
		a.GQL(t, `mutation($id: ID!) { enableWebhookEndpoint(id: $id) { enabled } }`, map[string]any{"id": firstID}).OK(t, "enableWebhookEndpoint")
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "EP-2", amount: "1"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		a.GQL(t, `mutation { payOrder(orderNo: "EP-2") { id } }`, nil).OK(t, "payOrder")
		del := a.GQL(t, `mutation($id: ID!) { deleteWebhookEndpoint(id: $id) { id url } }`, map[string]any{"id": firstID}).OK(t, "deleteWebhookEndpoint")
		if graphtest.Str(del, "url") != "https://first.example.com/h" {
			t.Fatalf("deleted %v", del)
		}
		ds, err = a.App.DB.Client.WebhookDelivery.Query().Where(webhookdelivery.BizDataContains(`"EP-2"`)).All(ctx)
		if err != nil || len(ds) != 2 {
			t.Fatalf("%d deliveries of the payment (%v), want 2", len(ds), err)
		}
		for _, d := range ds {
			if d.CallbackURL == "https://first.example.com/h" && (d.Status != dispatch.StatusCancelled || d.EndpointID != nil) {
				t.Fatalf("the deleted endpoint's delivery is %s (endpoint %v), want CANCELLED", d.Status, d.EndpointID)
			}
		}
		r := a.GQL(t, list, map[string]any{"id": appID}).OK(t, "partnerApps")
		if got := graphtest.Str(r, "edges", 0, "node", "callbackURL"); got != "https://second.example.com/h" {
			t.Fatalf("callbackURL %q after deleting the first endpoint, want the second's", got)
		}
		a.GQL(t, `mutation($id: ID!) { enableWebhookEndpoint(id: $id) { id } }`, map[string]any{"id": firstID}).Fails(t, "NOT_FOUND")

		// At most 10 per app.
		for i := len(endpoints()); i < webhook.MaxEndpoints; i++ {
			a.GQL(t, `mutation($app: ID!, $u: String!) { createWebhookEndpoint(appID: $app, input: {url: $u}) { secret } }`,
				map[string]any{"app": appID, "u": fmt.Sprintf("https://n%d.example.com/h", i)}).OK(t, "createWebhookEndpoint")
		}
		e := a.GQL(t, `mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "https://eleven.example.com"}) { secret } }`,
			map[string]any{"app": appID}).Fails(t, "VALIDATION_FAILED")
		if !strings.Contains(e.Message, "10") {
			t.Fatalf("11th endpoint: %q", e.Message)
		}
	})
}

// TestWebhookEndpointEventTypesNonNull: WebhookEndpoint.eventTypes is
// declared [String!]! (a client may rely on a list), and an endpoint whose
// filter was never set (stored as null: made by createPartnerApp's
// callbackURL) reads [] over both the app's list and webhookEndpoints.
func TestWebhookEndpointEventTypesNonNull(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		r := a.GQL(t, `{ __type(name: "WebhookEndpoint") { fields { name type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } }`, nil).OK(t, "__type")
		var typ string
		for _, f := range graphtest.Dig(r, "fields").([]any) {
			if graphtest.Str(f, "name") != "eventTypes" {
				continue
			}
			for tr := graphtest.Dig(f, "type"); tr != nil; tr = graphtest.Dig(tr, "ofType") {
				typ += graphtest.Str(tr, "kind") + " " + graphtest.Str(tr, "name") + "/"
			}
		}
		if want := "NON_NULL /LIST /NON_NULL /SCALAR String/"; typ != want {
			t.Fatalf("WebhookEndpoint.eventTypes is %q, want %q ([String!]!)", typ, want)
		}

		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "unset filter", callbackURL: "https://unset.example.com/h"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		l := a.GQL(t, `query($id: ID!) { partnerApps(where: {id: $id}) { edges { node { webhookEndpoints { eventTypes } } } } }`,
			map[string]any{"id": graphtest.Str(app, "app", "id")}).OK(t, "partnerApps")
		if got, ok := graphtest.Dig(l, "edges", 0, "node", "webhookEndpoints", 0, "eventTypes").([]any); !ok || len(got) != 0 {
			t.Fatalf("an endpoint whose filter was never set: eventTypes = %#v, want []", graphtest.Dig(l, "edges", 0, "node", "webhookEndpoints", 0, "eventTypes"))
		}
	})
}
