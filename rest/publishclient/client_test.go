package publishclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"gatehouse/internal/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/publishclient"
)

// TestGeneratedClient drives a running gatehouse with the client
// generated from docs/openapi-admin.yaml (make generate): a publish, its
// repeat with the same Idempotency-Key, a payload against its schema, and
// a batch with one invalid event. A server that drifted from the
// document fails here (the client decodes by the document's statuses).
func TestGeneratedClient(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		t.Cleanup(sink.Close)
		ctx := context.Background()
		app, _, err := e.App.Partners.Create(ctx, partner.CreateInput{AppName: "Client", CallbackURL: sink.URL + "/hook"})
		if err != nil {
			t.Fatal(err)
		}
		schema := `{"type": "object", "required": ["invoice_no"], "properties": {"invoice_no": {"type": "string"}}}`
		if _, err := e.App.Webhooks.CreateEventType(ctx, "invoice.issued", "test", json.RawMessage(schema), nil); err != nil {
			t.Fatal(err)
		}
		_, key, err := e.App.APIKeys.CreateScoped(ctx, "billing", apikey.RolePublisher, []string{"invoice.*"})
		if err != nil {
			t.Fatal(err)
		}
		c, err := publishclient.NewClientWithResponses(e.AdminURL, publishclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("X-API-Key", key)
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}

		k := "inv-1"
		ev := publishclient.Event{AppId: int64(app.ID), EventType: "invoice.issued", BizData: map[string]any{"invoice_no": "INV-1"}}
		r, err := c.PublishEventWithResponse(ctx, &publishclient.PublishEventParams{IdempotencyKey: &k}, ev)
		if err != nil || r.JSON201 == nil || r.JSON201.Deliveries != 1 || r.JSON201.Replayed {
			t.Fatalf("publish: %v %d %s", err, r.StatusCode(), r.Body)
		}
		again, err := c.PublishEventWithResponse(ctx, &publishclient.PublishEventParams{IdempotencyKey: &k}, ev)
		if err != nil || again.JSON200 == nil || again.JSON200.Id != r.JSON201.Id || !again.JSON200.Replayed ||
			again.Headers200 == nil || again.Headers200.IdempotentReplayed == nil || *again.Headers200.IdempotentReplayed != "true" {
			t.Fatalf("repeat: %v %d %s", err, again.StatusCode(), again.Body)
		}
		bad, err := c.PublishEventWithResponse(ctx, nil, publishclient.Event{AppId: int64(app.ID), EventType: "invoice.issued", BizData: map[string]any{"invoice_no": 7}})
		if err != nil || bad.JSON422 == nil || bad.JSON422.Path == nil || *bad.JSON422.Path != "$.invoice_no" {
			t.Fatalf("schema mismatch: %v %d %s", err, bad.StatusCode(), bad.Body)
		}

		k2 := "inv-2"
		batch, err := c.PublishEventBatchWithResponse(ctx, publishclient.EventBatch{Events: []publishclient.BatchEvent{
			{AppId: int64(app.ID), EventType: "invoice.issued", BizData: map[string]any{"invoice_no": "INV-2"}, IdempotencyKey: &k2},
			{AppId: int64(app.ID), EventType: "invoice.issued", BizData: map[string]any{}},
		}})
		if err != nil || batch.JSON200 == nil || len(batch.JSON200.Results) != 2 {
			t.Fatalf("batch: %v %d %s", err, batch.StatusCode(), batch.Body)
		}
		ok, invalid := batch.JSON200.Results[0], batch.JSON200.Results[1]
		if ok.Status != 201 || ok.Event == nil || ok.Event.Deliveries != 1 || invalid.Status != 422 || invalid.Error == nil ||
			invalid.Error.Path == nil || *invalid.Error.Path != "$.invoice_no" {
			t.Fatalf("batch results: %s", batch.Body)
		}
	})
}
