package graph_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

const (
	declareType = `mutation($name: String!, $schema: JSON!) {
  createWebhookEventType(name: $name, description: "An invoice was issued.", schema: $schema) { name description schema example builtIn createTime }
}`
	publishEvent = `mutation($app: ID!, $biz: JSON!, $key: String) {
  publishWebhookEvent(appID: $app, eventType: "invoice.issued", bizData: $biz, idempotencyKey: $key) {
    eventID eventType bizData idempotencyKey replayed createTime app { id } deliveries { id eventID status }
  }
}`
)

var invoiceTypeSchema = map[string]any{
	"type":     "object",
	"required": []any{"invoice_no", "lines"},
	"properties": map[string]any{
		"invoice_no": map[string]any{"type": "string"},
		"lines": map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "required": []any{"sku", "qty"},
			"properties": map[string]any{"sku": map[string]any{"type": "string"}, "qty": map[string]any{"type": "integer", "minimum": 1}},
		}},
	},
	"examples": []any{map[string]any{"invoice_no": "INV-1", "lines": []any{}}},
}

// TestWebhookCatalogueAndPublish: the catalogue lists the built-in types
// and a declared custom one; publishWebhookEvent refuses a bad payload
// with the path of the first error, delivers a good one, and its repeat
// with the same idempotency key sends nothing new. Each mutation is in
// the audit log.
func TestWebhookCatalogueAndPublish(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		var received atomic.Int32
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			received.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(sink.Close)
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Invoices", "callbackURL": sink.URL + "/hook"}}).OK(t, "createPartnerApp")
		appID := graphtest.Str(p, "app", "id")

		res := a.GQL(t, `{ webhookEventTypes { name description schema example builtIn createTime } }`, nil)
		if res.Status != 200 || len(res.Errors) > 0 {
			t.Fatalf("webhookEventTypes: %s", res.Body)
		}
		types, _ := res.Data["webhookEventTypes"].([]any)
		if len(types) != 4 || graphtest.Str(types[1], "name") != "order.paid" || graphtest.Dig(types[1], "builtIn") != true ||
			graphtest.Dig(types[1], "schema", "properties", "order_no") == nil || graphtest.Str(types[1], "example", "order_no") == "" || graphtest.Dig(types[1], "createTime") != nil {
			t.Fatalf("built-in catalogue: %s", res.Body)
		}

		a.GQL(t, declareType, map[string]any{"name": "order.shipped", "schema": invoiceTypeSchema}).Fails(t, "VALIDATION_FAILED")
		e := a.GQL(t, declareType, map[string]any{"name": "invoice.issued", "schema": map[string]any{"type": 7}}).Fails(t, "VALIDATION_FAILED")
		if e.Extensions["field"] != "schema" {
			t.Errorf("a schema that does not compile: %v", e)
		}
		ty := a.GQL(t, declareType, map[string]any{"name": "invoice.issued", "schema": invoiceTypeSchema}).OK(t, "createWebhookEventType")
		if graphtest.Str(ty, "name") != "invoice.issued" || ty["builtIn"] != false || graphtest.Str(ty, "example", "invoice_no") != "INV-1" || graphtest.Str(ty, "createTime") == "" {
			t.Fatalf("declared: %v", ty)
		}
		a.GQL(t, declareType, map[string]any{"name": "invoice.issued", "schema": invoiceTypeSchema}).Fails(t, "CONFLICT")
		res = a.GQL(t, `{ webhookEventTypes { name } }`, nil)
		if types, _ := res.Data["webhookEventTypes"].([]any); len(types) != 5 || graphtest.Str(types[4], "name") != "invoice.issued" {
			t.Fatalf("catalogue: %s", res.Body)
		}

		bad := map[string]any{"invoice_no": "I-1", "lines": []any{map[string]any{"sku": "A", "qty": 1}, map[string]any{"sku": "B", "qty": 0}}}
		e = a.GQL(t, publishEvent, map[string]any{"app": appID, "biz": bad, "key": "inv-1"}).Fails(t, "VALIDATION_FAILED")
		if e.Extensions["field"] != "bizData" || e.Extensions["path"] != "$.lines[1].qty" {
			t.Fatalf("bad payload: %+v", e)
		}
		a.GQL(t, `mutation($app: ID!) { publishWebhookEvent(appID: $app, eventType: "invoice.voided", bizData: {}) { eventID } }`, map[string]any{"app": appID}).Fails(t, "NOT_FOUND")
		a.GQL(t, `mutation { publishWebhookEvent(appID: 424242, eventType: "invoice.issued", bizData: {invoice_no: "x", lines: []}) { eventID } }`, nil).Fails(t, "NOT_FOUND")

		good := map[string]any{"invoice_no": "I-1", "lines": []any{map[string]any{"sku": "A", "qty": 1}}}
		m := a.GQL(t, publishEvent, map[string]any{"app": appID, "biz": good, "key": "inv-1"}).OK(t, "publishWebhookEvent")
		if m["replayed"] != false || graphtest.Str(m, "deliveries", 0, "eventID") != graphtest.Str(m, "eventID") || graphtest.Str(m, "bizData", "invoice_no") != "I-1" ||
			graphtest.Str(m, "app", "id") != appID || graphtest.Str(m, "idempotencyKey") != "inv-1" {
			t.Fatalf("published: %v", m)
		}
		const one = `query($id: ID!) { webhookDeliveries(where: {id: $id}) { edges { node { status } } } }`
		graphtest.Eventually(t, 10*time.Second, "the published event is delivered", func() bool {
			r := a.GQL(t, one, map[string]any{"id": graphtest.Str(m, "deliveries", 0, "id")}).OK(t, "webhookDeliveries")
			return graphtest.Str(r, "edges", 0, "node", "status") == "SUCCESS"
		})
		again := a.GQL(t, publishEvent, map[string]any{"app": appID, "biz": good, "key": "inv-1"}).OK(t, "publishWebhookEvent")
		if again["replayed"] != true || graphtest.Str(again, "eventID") != graphtest.Str(m, "eventID") || graphtest.Str(again, "deliveries", 0, "id") != graphtest.Str(m, "deliveries", 0, "id") {
			t.Fatalf("repeat: %v", again)
		}
		n := a.GQL(t, `{ webhookDeliveries(where: {eventType: "invoice.issued"}) { totalCount } }`, nil).OK(t, "webhookDeliveries")
		if graphtest.Num(n, "totalCount") != 1 || received.Load() != 1 {
			t.Fatalf("%v deliveries, %d received: the repeat sent something", n, received.Load())
		}

		// sendTestWebhook sends a type's example; its appID form still works.
		ex := a.GQL(t, `mutation($app: ID!) { sendTestWebhook(appID: $app, eventType: "invoice.issued") { eventType bizDataJSON } }`, map[string]any{"app": appID}).OK(t, "sendTestWebhook")
		if graphtest.Str(ex, "eventType") != "invoice.issued" || graphtest.Str(ex, "bizDataJSON", "invoice_no") != "INV-1" {
			t.Errorf("test of invoice.issued: %v", ex)
		}
		if plain := a.GQL(t, `mutation($app: ID!) { sendTestWebhook(appID: $app) { eventType } }`, map[string]any{"app": appID}).OK(t, "sendTestWebhook"); graphtest.Str(plain, "eventType") != "webhook.test" {
			t.Errorf("sendTestWebhook(appID): %v", plain)
		}

		// endpointID narrows the test and the recovery to one endpoint.
		eps := a.GQL(t, `query($app: ID!) { partnerApps(where: {id: $app}) { edges { node { webhookEndpoints { id } } } } }`, map[string]any{"app": appID}).OK(t, "partnerApps")
		epID := graphtest.Str(eps, "edges", 0, "node", "webhookEndpoints", 0, "id")
		single := a.GQL(t, `mutation($app: ID!, $ep: ID) { sendTestWebhook(appID: $app, endpointID: $ep) { eventType endpointID } }`, map[string]any{"app": appID, "ep": epID}).OK(t, "sendTestWebhook")
		if graphtest.Str(single, "endpointID") != epID {
			t.Errorf("sendTestWebhook(endpointID): %v", single)
		}
		a.GQL(t, `mutation($app: ID!) { sendTestWebhook(appID: $app, endpointID: 987654) { id } }`, map[string]any{"app": appID}).Fails(t, "NOT_FOUND")
		rec := a.GQL(t, `mutation($ep: ID!) { resendFailedWebhookDeliveries(endpointID: $ep, since: "2026-01-01T00:00:00Z") }`, map[string]any{"ep": epID})
		if rec.Status != 200 || len(rec.Errors) > 0 || rec.Data["resendFailedWebhookDeliveries"] != float64(0) {
			t.Errorf("recovery of a healthy endpoint: %s", rec.Body)
		}
		a.GQL(t, `mutation { resendFailedWebhookDeliveries(endpointID: 987654, since: "2026-01-01") }`, nil).Fails(t, "NOT_FOUND")

		audit := a.GQL(t, `{ auditEvents(where: {mutationIn: ["createWebhookEventType", "publishWebhookEvent"]}, orderBy: {field: TIME, direction: ASC}) {
  edges { node { mutation targetType targetID outcome errorCode } } } }`, nil).OK(t, "auditEvents")
		edges, _ := audit["edges"].([]any)
		// Successful publishes are not audited (the message log records
		// them): the type's creation and the refusals are.
		if len(edges) != 7 || graphtest.Str(edges[2], "node", "targetType") != "WebhookEventType" || graphtest.Str(edges[2], "node", "targetID") != "invoice.issued" ||
			graphtest.Str(edges[2], "node", "outcome") != "SUCCESS" || graphtest.Str(edges[4], "node", "targetType") != "PartnerApp" || graphtest.Str(edges[4], "node", "targetID") != appID ||
			graphtest.Str(edges[4], "node", "errorCode") != "VALIDATION_FAILED" {
			t.Fatalf("audit log: %v", audit)
		}
	})
}
