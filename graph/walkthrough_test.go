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

// The "Declare a type" walkthrough of docs/webhooks.md: its GraphQL blocks
// are taken from here, verbatim (cmd/gatehouse TestWalkthroughsAreCode),
// and TestDeclareTypeWalkthrough runs them.
const (
	walkthroughDeclare = `mutation DeclareInvoiceIssued {
  createWebhookEventType(
    name: "invoice.issued"
    description: "An invoice was issued to the partner."
    schema: {
      type: "object"
      required: ["invoice_no", "amount", "lines"]
      properties: {
        invoice_no: {type: "string", minLength: 1}
        amount: {type: "number", minimum: 0}
        lines: {type: "array", items: {
          type: "object"
          required: ["sku", "qty"]
          properties: {sku: {type: "string"}, qty: {type: "integer", minimum: 1}}
        }}
      }
      examples: [{invoice_no: "INV-1001", amount: 99.9, lines: [{sku: "A-1", qty: 2}]}]
    }
  ) { name example }
}
`
	walkthroughPublish = `mutation PublishInvoiceIssued($appID: ID!) {
  publishWebhookEvent(
    appID: $appID
    eventType: "invoice.issued"
    bizData: {invoice_no: "INV-1001", amount: 99.9, lines: [{sku: "A-1", qty: 2}]}
    idempotencyKey: "invoice-INV-1001-issued"
  ) { eventID replayed deliveries { id status } }
}
`
	walkthroughBad = `mutation PublishBadInvoice($appID: ID!) {
  publishWebhookEvent(
    appID: $appID
    eventType: "invoice.issued"
    bizData: {invoice_no: "INV-1002", amount: 5, lines: [{sku: "A-1", qty: 0}]}
  ) { eventID }
}
`
	walkthroughTest = `mutation SendInvoiceExample($appID: ID!) {
  sendTestWebhook(appID: $appID, eventType: "invoice.issued") { eventID bizDataJSON }
}
`
)

// TestDeclareTypeWalkthrough runs the page's snippets in order: declare
// the type, publish it (delivered), publish it again with the same key
// (replayed, nothing sent), a bad payload (VALIDATION_FAILED at the path
// the page shows), and the type's example to a receiver.
func TestDeclareTypeWalkthrough(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		var received atomic.Int32
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			received.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(sink.Close)
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Billing", "callbackURL": sink.URL + "/hook"}}).OK(t, "createPartnerApp")
		vars := map[string]any{"appID": graphtest.Str(p, "app", "id")}

		ty := a.GQL(t, walkthroughDeclare, nil).OK(t, "createWebhookEventType")
		if graphtest.Str(ty, "name") != "invoice.issued" || graphtest.Str(ty, "example", "invoice_no") != "INV-1001" {
			t.Fatalf("declared: %v", ty)
		}
		m := a.GQL(t, walkthroughPublish, vars).OK(t, "publishWebhookEvent")
		if m["replayed"] != false || graphtest.Str(m, "deliveries", 0, "status") != "PENDING" {
			t.Fatalf("published: %v", m)
		}
		graphtest.Eventually(t, 10*time.Second, "the invoice.issued webhook arrives", func() bool { return received.Load() == 1 })
		again := a.GQL(t, walkthroughPublish, vars).OK(t, "publishWebhookEvent")
		if again["replayed"] != true || graphtest.Str(again, "eventID") != graphtest.Str(m, "eventID") {
			t.Fatalf("again: %v", again)
		}
		e := a.GQL(t, walkthroughBad, vars).Fails(t, "VALIDATION_FAILED")
		if e.Extensions["path"] != "$.lines[0].qty" || e.Extensions["field"] != "bizData" {
			t.Fatalf("bad payload: %+v", e)
		}
		ex := a.GQL(t, walkthroughTest, vars).OK(t, "sendTestWebhook")
		if graphtest.Str(ex, "bizDataJSON", "invoice_no") != "INV-1001" {
			t.Fatalf("example: %v", ex)
		}
		graphtest.Eventually(t, 10*time.Second, "the example arrives", func() bool { return received.Load() == 2 })
	})
}
