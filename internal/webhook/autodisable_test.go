package webhook_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/ent/auditevent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/audit"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestAutoDisable: an endpoint whose every delivery has FAILED for 5 days
// (injected clock) is disabled — once, with an audit event, a WARN line
// and the counter — while one that failed for less, or succeeded since,
// is not; the disabled endpoint's new deliveries are held and go out
// when it is enabled again.
func TestAutoDisable(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		clock := newFakeClock()
		var healthy atomic.Bool
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Millisecond, RetentionEvery: time.Hour, Now: clock.Now})
		trail, err := audit.NewService(e.db, nil, audit.Options{Retention: config.Defaults().Audit.Retention, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		e.svc.SetAudit(trail)
		ctx := context.Background()
		down := newReceiver(t, func(int) int {
			if healthy.Load() {
				return http.StatusNoContent
			}
			return http.StatusServiceUnavailable
		})
		ok := newReceiver(t, always(http.StatusNoContent))
		appID, _ := e.newApp(t, "")
		failing, _ := e.endpoint(t, appID, down.URL+"/down")
		fine, _ := e.endpoint(t, appID, ok.URL+"/ok")

		// One order.paid: FAILED at the failing endpoint (the clock moves
		// through its retries), SUCCESS at the other.
		e.orderEvent(t, appID, false)
		waitFor(t, 20*time.Second, func() bool {
			clock.Advance(20 * time.Second)
			n, _ := e.db.WebhookDelivery.Query().Where(webhookdelivery.EndpointID(failing), webhookdelivery.StatusEQ(dispatch.StatusFailed)).Count(ctx)
			m, _ := e.db.WebhookDelivery.Query().Where(webhookdelivery.EndpointID(fine), webhookdelivery.StatusEQ(dispatch.StatusSuccess)).Count(ctx)
			return n == 1 && m == 1
		}, func() string { return "the failing endpoint's delivery is not FAILED" })

		// Counted from the failure, not from the end of the wait above: on a
		// slow run the wait advanced the clock by minutes after it.
		failed := e.db.WebhookDelivery.Query().Where(webhookdelivery.EndpointID(failing), webhookdelivery.StatusEQ(dispatch.StatusFailed)).OnlyX(ctx)
		before := webhook.EndpointsDisabled()
		clock.Set(failed.UpdateTime.Add(dispatch.AutoDisableAfter - 5*time.Minute))
		if n, err := e.svc.AutoDisable(ctx); err != nil || n != 0 {
			t.Fatalf("before 5 days: disabled %d (%v)", n, err)
		}
		clock.Advance(10 * time.Minute)
		if n, err := e.svc.AutoDisable(ctx); err != nil || n != 1 {
			t.Fatalf("after 5 days: disabled %d (%v), want 1", n, err)
		}
		if n, err := e.svc.AutoDisable(ctx); err != nil || n != 0 {
			t.Fatalf("a second run: disabled %d (%v)", n, err)
		}
		if ep, _ := e.db.WebhookEndpoint.Get(ctx, failing); ep.Enabled || ep.AutoDisabledAt == nil {
			t.Fatalf("the failing endpoint: enabled %v, autoDisabledAt %v; want disabled automatically", ep.Enabled, ep.AutoDisabledAt)
		}
		if ep, _ := e.db.WebhookEndpoint.Get(ctx, fine); !ep.Enabled {
			t.Fatal("the healthy endpoint was disabled")
		}
		if d := webhook.EndpointsDisabled() - before; d != 1 {
			t.Errorf("gatehouse_webhook_endpoints_disabled_total rose by %v", d)
		}
		ev, err := e.db.AuditEvent.Query().Where(auditevent.Mutation(dispatch.AutoDisableMutation)).Only(ctx)
		if err != nil || ev.TargetType == nil || *ev.TargetType != "WebhookEndpoint" || ev.Outcome != auditevent.OutcomeSUCCESS {
			t.Errorf("audit event %+v (%v)", ev, err)
		}
		if logs := e.logs.String(); !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "webhook endpoint disabled") {
			t.Errorf("no WARN line:\n%s", logs)
		}

		// Held while disabled, sent once enabled.
		healthy.Store(true)
		e.orderEvent(t, appID, false)
		held, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.EndpointID(failing), webhookdelivery.StatusEQ(dispatch.StatusPending)).Only(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool {
			n, _ := e.db.WebhookDelivery.Query().Where(webhookdelivery.EndpointID(fine), webhookdelivery.StatusEQ(dispatch.StatusSuccess)).Count(ctx)
			return n == 2
		}, func() string { return "the healthy endpoint's second delivery" })
		if d := e.delivery(t, held.ID); d.Status != dispatch.StatusPending || d.AttemptCount != 0 {
			t.Fatalf("a disabled endpoint's delivery went out: %+v", d)
		}
		if _, err := e.svc.SetEndpointEnabled(ctx, failing, true); err != nil {
			t.Fatal(err)
		}
		if ep, _ := e.db.WebhookEndpoint.Get(ctx, failing); ep.AutoDisabledAt != nil {
			t.Fatalf("enabled again, autoDisabledAt %v is kept", ep.AutoDisabledAt)
		}
		e.svc.Notify()
		e.waitStatus(t, held.ID, dispatch.StatusSuccess, 10*time.Second)
	})
}

// TestAutoDisableEnabledAgainStays: an operator who enables an endpoint
// that was disabled automatically gets a fresh 5 days — the failures from
// before are not held against it again at the next check (the retention
// job runs every minute) — and an endpoint failing every delivery for 5
// days after that is disabled again.
func TestAutoDisableEnabledAgainStays(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		clock := newFakeClock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Millisecond, RetentionEvery: time.Hour, Now: clock.Now})
		ctx := context.Background()
		down := newReceiver(t, always(http.StatusServiceUnavailable))
		appID, _ := e.newApp(t, "")
		failing, _ := e.endpoint(t, appID, down.URL+"/down")
		failAll := func(want int) {
			e.orderEvent(t, appID, false)
			waitFor(t, 20*time.Second, func() bool {
				clock.Advance(20 * time.Second)
				n, _ := e.db.WebhookDelivery.Query().Where(webhookdelivery.EndpointID(failing), webhookdelivery.StatusEQ(dispatch.StatusFailed)).Count(ctx)
				return n == want
			}, func() string { return "the failing endpoint's delivery is not FAILED" })
		}
		failAll(1)
		clock.Advance(dispatch.AutoDisableAfter + time.Minute)
		if n, err := e.svc.AutoDisable(ctx); err != nil || n != 1 {
			t.Fatalf("after 5 days: disabled %d (%v), want 1", n, err)
		}
		if _, err := e.svc.SetEndpointEnabled(ctx, failing, true); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			clock.Advance(time.Minute)
			if n, err := e.svc.AutoDisable(ctx); err != nil || n != 0 {
				t.Fatalf("enabled by an operator, then disabled again %d (%v) for the failures before", n, err)
			}
		}
		if ep, _ := e.db.WebhookEndpoint.Get(ctx, failing); !ep.Enabled {
			t.Fatal("the endpoint an operator enabled is disabled")
		}
		failAll(2)
		clock.Advance(dispatch.AutoDisableAfter + time.Minute)
		if n, err := e.svc.AutoDisable(ctx); err != nil || n != 1 {
			t.Fatalf("failing 5 days after it was enabled: disabled %d (%v), want 1", n, err)
		}
	})
}
