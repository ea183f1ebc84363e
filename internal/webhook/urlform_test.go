package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// TestMalformedStoredURLFailsItsAttempt: a delivery whose stored callback
// URL is malformed (a row written before today's checks) is not sent; its
// attempt records why. Both ways through the check: the URL is its
// endpoint's own (checked once per endpoint load), or another one (the
// endpoint's URL is fine, the delivery kept an older one).
func TestMalformedStoredURLFailsItsAttempt(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(200))
		appID, _ := e.newApp(t, rcv.URL)
		url := rcv.URL + "/second"
		second, _, err := e.svc.CreateEndpoint(ctx, appID, webhook.EndpointInput{URL: &url})
		if err != nil {
			t.Fatal(err)
		}
		disabled, enabled := partner.Disabled, partner.Enabled
		if _, err := e.partners.Update(ctx, appID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		q, err := webhook.Fanout(ctx, e.db.Client, webhook.Event{AppID: appID, Type: "order.paid", BizData: []byte(`{"order_no":"SO1"}`)})
		if err != nil || len(q.Deliveries) != 2 {
			t.Fatalf("queued %d deliveries: %v", len(q.Deliveries), err)
		}
		own, older := q.Deliveries[0], q.Deliveries[1]
		if *older.EndpointID != second.ID {
			t.Fatalf("deliveries out of endpoint order")
		}
		// The first endpoint's URL and its delivery's: one malformed URL.
		const withUser = "http://user@127.0.0.1:1/hook"
		e.db.WebhookEndpoint.UpdateOneID(*own.EndpointID).SetURL(withUser).ExecX(ctx)
		e.db.WebhookDelivery.UpdateOneID(own.ID).SetCallbackURL(withUser).ExecX(ctx)
		// The second endpoint keeps its URL; its delivery has another.
		e.db.WebhookDelivery.UpdateOneID(older.ID).SetCallbackURL("ftp://127.0.0.1/hook").ExecX(ctx)
		if _, err := e.partners.Update(ctx, appID, partner.UpdateInput{Status: &enabled}); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[int]string{own.ID: "user information is not allowed", older.ID: "scheme must be http or https"} {
			var got string
			waitFor(t, 10*time.Second, func() bool {
				as := e.attempts(t, id)
				if len(as) == 0 {
					return false
				}
				got = as[0].Error
				return true
			}, func() string { return "no attempt recorded" })
			if !strings.Contains(got, want) {
				t.Errorf("delivery %d: attempt error %q, want it to say %q", id, got, want)
			}
		}
		if n := rcv.count(); n != 0 {
			t.Errorf("the receiver got %d requests", n)
		}
	})
}
