package graph_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

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
		a := startAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		var received atomic.Int32
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			received.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(sink.Close)
		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Invoices", "callbackURL": sink.URL + "/hook"}}).ok(t, "createPartnerApp")
		appID := str(p, "app", "id")

		res := a.gql(t, `{ webhookEventTypes { name description schema example builtIn createTime } }`, nil)
		if res.Status != 200 || len(res.Errors) > 0 {
			t.Fatalf("webhookEventTypes: %s", res.Body)
		}
		types, _ := res.Data["webhookEventTypes"].([]any)
		if len(types) != 4 || str(types[1], "name") != "order.paid" || dig(types[1], "builtIn") != true ||
			dig(types[1], "schema", "properties", "order_no") == nil || str(types[1], "example", "order_no") == "" || dig(types[1], "createTime") != nil {
			t.Fatalf("built-in catalogue: %s", res.Body)
		}

		a.gql(t, declareType, map[string]any{"name": "order.shipped", "schema": invoiceTypeSchema}).fails(t, "VALIDATION_FAILED")
		e := a.gql(t, declareType, map[string]any{"name": "invoice.issued", "schema": map[string]any{"type": 7}}).fails(t, "VALIDATION_FAILED")
		if e.Extensions["field"] != "schema" {
			t.Errorf("a schema that does not compile: %v", e)
		}
		ty := a.gql(t, declareType, map[string]any{"name": "invoice.issued", "schema": invoiceTypeSchema}).ok(t, "createWebhookEventType")
		if str(ty, "name") != "invoice.issued" || ty["builtIn"] != false || str(ty, "example", "invoice_no") != "INV-1" || str(ty, "createTime") == "" {
			t.Fatalf("declared: %v", ty)
		}
		a.gql(t, declareType, map[string]any{"name": "invoice.issued", "schema": invoiceTypeSchema}).fails(t, "CONFLICT")
		res = a.gql(t, `{ webhookEventTypes { name } }`, nil)
		if types, _ := res.Data["webhookEventTypes"].([]any); len(types) != 5 || str(types[4], "name") != "invoice.issued" {
			t.Fatalf("catalogue: %s", res.Body)
		}

		bad := map[string]any{"invoice_no": "I-1", "lines": []any{map[string]any{"sku": "A", "qty": 1}, map[string]any{"sku": "B", "qty": 0}}}
		e = a.gql(t, publishEvent, map[string]any{"app": appID, "biz": bad, "key": "inv-1"}).fails(t, "VALIDATION_FAILED")
		if e.Extensions["field"] != "bizData" || e.Extensions["path"] != "$.lines[1].qty" {
			t.Fatalf("bad payload: %+v", e)
		}
		a.gql(t, `mutation($app: ID!) { publishWebhookEvent(appID: $app, eventType: "invoice.voided", bizData: {}) { eventID } }`, map[string]any{"app": appID}).fails(t, "NOT_FOUND")
		a.gql(t, `mutation { publishWebhookEvent(appID: 424242, eventType: "invoice.issued", bizData: {invoice_no: "x", lines: []}) { eventID } }`, nil).fails(t, "NOT_FOUND")

		good := map[string]any{"invoice_no": "I-1", "lines": []any{map[string]any{"sku": "A", "qty": 1}}}
		m := a.gql(t, publishEvent, map[string]any{"app": appID, "biz": good, "key": "inv-1"}).ok(t, "publishWebhookEvent")
		if m["replayed"] != false || str(m, "deliveries", 0, "eventID") != str(m, "eventID") || str(m, "bizData", "invoice_no") != "I-1" ||
			str(m, "app", "id") != appID || str(m, "idempotencyKey") != "inv-1" {
			t.Fatalf("published: %v", m)
		}
		const one = `query($id: ID!) { webhookDeliveries(where: {id: $id}) { edges { node { status } } } }`
		eventually(t, 10*time.Second, "the published event is delivered", func() bool {
			r := a.gql(t, one, map[string]any{"id": str(m, "deliveries", 0, "id")}).ok(t, "webhookDeliveries")
			return str(r, "edges", 0, "node", "status") == "SUCCESS"
		})
		again := a.gql(t, publishEvent, map[string]any{"app": appID, "biz": good, "key": "inv-1"}).ok(t, "publishWebhookEvent")
		if again["replayed"] != true || str(again, "eventID") != str(m, "eventID") || str(again, "deliveries", 0, "id") != str(m, "deliveries", 0, "id") {
			t.Fatalf("repeat: %v", again)
		}
		n := a.gql(t, `{ webhookDeliveries(where: {eventType: "invoice.issued"}) { totalCount } }`, nil).ok(t, "webhookDeliveries")
		if num(n, "totalCount") != 1 || received.Load() != 1 {
			t.Fatalf("%v deliveries, %d received: the repeat sent something", n, received.Load())
		}

		// sendTestWebhook sends a type's example; its appID form still works.
		ex := a.gql(t, `mutation($app: ID!) { sendTestWebhook(appID: $app, eventType: "invoice.issued") { eventType bizDataJSON } }`, map[string]any{"app": appID}).ok(t, "sendTestWebhook")
		if str(ex, "eventType") != "invoice.issued" || str(ex, "bizDataJSON", "invoice_no") != "INV-1" {
			t.Errorf("test of invoice.issued: %v", ex)
		}
		if plain := a.gql(t, `mutation($app: ID!) { sendTestWebhook(appID: $app) { eventType } }`, map[string]any{"app": appID}).ok(t, "sendTestWebhook"); str(plain, "eventType") != "webhook.test" {
			t.Errorf("sendTestWebhook(appID): %v", plain)
		}

		// endpointID narrows the test and the recovery to one endpoint.
		eps := a.gql(t, `query($app: ID!) { partnerApps(where: {id: $app}) { edges { node { webhookEndpoints { id } } } } }`, map[string]any{"app": appID}).ok(t, "partnerApps")
		epID := str(eps, "edges", 0, "node", "webhookEndpoints", 0, "id")
		single := a.gql(t, `mutation($app: ID!, $ep: ID) { sendTestWebhook(appID: $app, endpointID: $ep) { eventType endpointID } }`, map[string]any{"app": appID, "ep": epID}).ok(t, "sendTestWebhook")
		if str(single, "endpointID") != epID {
			t.Errorf("sendTestWebhook(endpointID): %v", single)
		}
		a.gql(t, `mutation($app: ID!) { sendTestWebhook(appID: $app, endpointID: 987654) { id } }`, map[string]any{"app": appID}).fails(t, "NOT_FOUND")
		rec := a.gql(t, `mutation($ep: ID!) { resendFailedWebhookDeliveries(endpointID: $ep, since: "2026-01-01T00:00:00Z") }`, map[string]any{"ep": epID})
		if rec.Status != 200 || len(rec.Errors) > 0 || rec.Data["resendFailedWebhookDeliveries"] != float64(0) {
			t.Errorf("recovery of a healthy endpoint: %s", rec.Body)
		}
		a.gql(t, `mutation { resendFailedWebhookDeliveries(endpointID: 987654, since: "2026-01-01") }`, nil).fails(t, "NOT_FOUND")

		audit := a.gql(t, `{ auditEvents(where: {mutationIn: ["createWebhookEventType", "publishWebhookEvent"]}, orderBy: {field: TIME, direction: ASC}) {
  edges { node { mutation targetType targetID outcome errorCode } } } }`, nil).ok(t, "auditEvents")
		edges, _ := audit["edges"].([]any)
		// Successful publishes are not audited (the message log records
		// them): the type's creation and the refusals are.
		if len(edges) != 7 || str(edges[2], "node", "targetType") != "WebhookEventType" || str(edges[2], "node", "targetID") != "invoice.issued" ||
			str(edges[2], "node", "outcome") != "SUCCESS" || str(edges[4], "node", "targetType") != "PartnerApp" || str(edges[4], "node", "targetID") != appID ||
			str(edges[4], "node", "errorCode") != "VALIDATION_FAILED" {
			t.Fatalf("audit log: %v", audit)
		}
	})
}
