package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/outbound"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestResendFailedSinceAndEndpoint: the recovery after an outage re-queues
// only the FAILED deliveries created since the given time, of one
// endpoint when it is named; the appID form still re-queues all of the
// app's; an endpoint of another app is refused.
func TestResendFailedSinceAndEndpoint(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		// A breaker that never opens: the test fails 18 attempts per endpoint.
		cfg := outbound.DefaultConfig()
		cfg.BreakerWindow = 1000
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Millisecond, Outbound: &cfg})
		ctx := context.Background()
		var up atomic.Bool
		rcv := newReceiver(t, func(int) int {
			if up.Load() {
				return http.StatusNoContent
			}
			return http.StatusServiceUnavailable
		})
		appID, _ := e.newApp(t, "")
		epA, _ := e.endpoint(t, appID, rcv.URL+"/a")
		epB, _ := e.endpoint(t, appID, rcv.URL+"/b")
		other, _ := e.newApp(t, "")
		epOther, _ := e.endpoint(t, other, rcv.URL+"/other")
		failed := func(want int) {
			t.Helper()
			waitFor(t, 20*time.Second, func() bool {
				n, _ := e.db.WebhookDelivery.Query().Where(webhookdelivery.AppID(appID), webhookdelivery.StatusEQ(dispatch.StatusFailed)).Count(ctx)
				return n == want
			}, func() string { return "deliveries are not FAILED" })
		}
		e.orderEvent(t, appID, false) // before the outage's start: 2 deliveries (A, B)
		failed(2)
		time.Sleep(5 * time.Millisecond) // create times on either side of since
		since := time.Now()
		e.orderEvent(t, appID, false)
		e.orderEvent(t, appID, true)
		failed(6)

		if _, err := e.svc.ResendFailed(ctx, webhook.ResendFilter{AppID: &appID, EndpointID: &epOther}); !errors.Is(err, webhook.ErrEndpointNotFound) {
			t.Errorf("an endpoint of another app: %v", err)
		}
		missing := epOther + 100
		if _, err := e.svc.ResendFailed(ctx, webhook.ResendFilter{EndpointID: &missing}); !errors.Is(err, webhook.ErrEndpointNotFound) {
			t.Errorf("an unknown endpoint: %v", err)
		}
		up.Store(true)
		n, err := e.svc.ResendFailed(ctx, webhook.ResendFilter{AppID: &appID, EndpointID: &epA, Since: &since})
		if err != nil || n != 2 {
			t.Fatalf("endpoint A since the outage: %d, %v; want 2", n, err)
		}
		waitFor(t, 10*time.Second, func() bool {
			n, _ := e.db.WebhookDelivery.Query().Where(webhookdelivery.EndpointID(epA), webhookdelivery.StatusEQ(dispatch.StatusSuccess)).Count(ctx)
			return n == 2
		}, func() string { return "endpoint A's recent deliveries are not delivered" })
		for ep, want := range map[int]int{epA: 1, epB: 3} {
			if n, _ := e.db.WebhookDelivery.Query().Where(webhookdelivery.EndpointID(ep), webhookdelivery.StatusEQ(dispatch.StatusFailed)).Count(ctx); n != want {
				t.Errorf("endpoint %d: %d FAILED left, want %d", ep, n, want)
			}
		}
		n, err = e.svc.ResendFailed(ctx, webhook.ResendFilter{Since: &since})
		if err != nil || n != 2 {
			t.Fatalf("every app since the outage: %d, %v; want 2 (endpoint B's)", n, err)
		}
		n, err = e.svc.ResendFailed(ctx, webhook.ResendFilter{AppID: &appID})
		if err != nil || n != 2 {
			t.Fatalf("the appID form: %d, %v; want the 2 older ones", n, err)
		}
	})
}
