package alerting_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/order"
	"gatehouse/internal/testenv"
)

// TestFailedCounterForEveryDeclaredType: the counter the failed-delivery
// alert reads exists at 0 for every declared event type, built-in or
// custom, including a custom type this replica never handled: one
// written to the database by another replica (as one declared before
// this replica started is), which this replica learns at the next scrape.
func TestFailedCounterForEveryDeclaredType(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		name := "elsewhere." + b.Name
		// Straight into the table, as another replica's
		// createWebhookEventType leaves it: this one's catalogue never sees it.
		if err := e.App.DB.Client.WebhookEventType.Create().SetName(name).SetDescription("declared by another replica").
			SetSchema(`{"type":"object"}`).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(e.AdminURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		f := families["gatehouse_webhook_deliveries_failed_total"]
		if f == nil {
			t.Fatal("gatehouse_webhook_deliveries_failed_total is not exported")
		}
		for _, typ := range []string{name, order.EventPaid, "webhook.test"} {
			if !hasLabel(f, "event_type", typ) {
				t.Errorf("gatehouse_webhook_deliveries_failed_total{event_type=%q} is not exported", typ)
			}
		}
	})
}
