package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/errs"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestSendTest: a webhook.test event goes out signed like any other; an
// app without a callback URL, a disabled app and an unknown app are
// refused with a reason.
func TestSendTest(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(http.StatusNoContent))
		appID, secret := e.newApp(t, rcv.URL)
		d, err := e.svc.SendTest(ctx, appID, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		r := rcv.requests()[0]
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Fatalf("signature: %v", err)
		}
		m := message(t, r.body)
		var biz webhook.TestEvent
		if err := json.Unmarshal([]byte(m.BizData), &biz); err != nil || m.EventType != webhook.EventTest || biz.AppKey == "" || biz.Message == "" {
			t.Fatalf("message %+v, bizData %+v (%v)", m, biz, err)
		}

		bare, _ := e.newApp(t, "")
		if _, err := e.svc.SendTest(ctx, bare, 0, ""); !errors.Is(err, webhook.ErrInvalidState) {
			t.Errorf("app without callback URL: %v", err)
		}
		disabled := partner.Disabled
		if _, err := e.partners.Update(ctx, appID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.SendTest(ctx, appID, 0, ""); !errors.Is(err, webhook.ErrInvalidState) {
			t.Errorf("disabled app: %v", err)
		}
		if _, err := e.svc.SendTest(ctx, 99999, 0, ""); !errors.Is(err, webhook.ErrAppNotFound) {
			t.Errorf("unknown app: %v", err)
		}
	})
}

// TestCancel: PENDING and RETRYING deliveries become CANCELLED and are
// never attempted again, even when due; an attempt in flight is recorded
// but no longer moves the delivery; other statuses and unknown ids are
// refused; a resend brings a cancelled delivery back.
func TestCancel(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		clock := newFakeClock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Minute, DrainTimeout: time.Second, Now: clock.Now})
		ctx := context.Background()
		failing := newReceiver(t, always(http.StatusServiceUnavailable))
		appID, _ := e.newApp(t, failing.URL)
		probe := newReceiver(t, always(http.StatusOK))
		probeID, _ := e.newApp(t, probe.URL)
		// settle lets the dispatcher run a round past everything due: a
		// probe event queued after is delivered.
		settle := func() {
			t.Helper()
			e.svc.Notify()
			p := e.pay(t, probeID)
			e.waitStatus(t, p.ID, dispatch.StatusSuccess, 10*time.Second)
		}

		// RETRYING → CANCELLED; its retry time passes without an attempt.
		retrying := e.pay(t, appID)
		e.waitStatus(t, retrying.ID, dispatch.StatusRetrying, 10*time.Second)
		d, err := e.svc.Cancel(ctx, retrying.ID)
		if err != nil || d.Status != dispatch.StatusCancelled {
			t.Fatalf("cancel RETRYING: %v %v", d, err)
		}
		clock.Advance(time.Hour)
		settle()
		if n := failing.count(); n != 1 {
			t.Fatalf("a cancelled delivery was attempted again (%d requests)", n)
		}

		// PENDING (held: the app is disabled) → CANCELLED; not sent once enabled.
		disabled, enabled := partner.Disabled, partner.Enabled
		if _, err := e.partners.Update(ctx, appID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		pending := e.pay(t, appID)
		if _, err := e.svc.Cancel(ctx, pending.ID); err != nil {
			t.Fatalf("cancel PENDING: %v", err)
		}
		if _, err := e.partners.Update(ctx, appID, partner.UpdateInput{Status: &enabled}); err != nil {
			t.Fatal(err)
		}
		settle()
		if d := e.delivery(t, pending.ID); d.Status != dispatch.StatusCancelled || d.AttemptCount != 0 || failing.count() != 1 {
			t.Fatalf("cancelled PENDING delivery: %s, %d attempts", d.Status, d.AttemptCount)
		}

		// Final statuses and unknown ids are refused.
		for _, id := range []int{retrying.ID, pending.ID} {
			if _, err := e.svc.Cancel(ctx, id); !errors.Is(err, webhook.ErrInvalidState) {
				t.Errorf("cancel CANCELLED: %v", err)
			}
		}
		ok := e.pay(t, probeID)
		e.waitStatus(t, ok.ID, dispatch.StatusSuccess, 10*time.Second)
		if _, err := e.svc.Cancel(ctx, ok.ID); !errors.Is(err, webhook.ErrInvalidState) {
			t.Errorf("cancel SUCCESS: %v", err)
		}
		if _, err := e.svc.Cancel(ctx, 99999); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("cancel unknown: %v", err)
		}

		// In flight: the attempt ends and is recorded; the delivery stays CANCELLED.
		slow := hanging(t)
		slowID, _ := e.newApp(t, slow.URL)
		inFlight := e.pay(t, slowID)
		waitFor(t, 10*time.Second, func() bool { return slow.count() == 1 }, func() string { return "no attempt started" })
		if _, err := e.svc.Cancel(ctx, inFlight.ID); err != nil {
			t.Fatal(err)
		}
		slow.release()
		waitFor(t, 10*time.Second, func() bool { return len(e.attempts(t, inFlight.ID)) == 1 }, func() string { return "the in-flight attempt was not recorded" })
		if d := e.delivery(t, inFlight.ID); d.Status != dispatch.StatusCancelled {
			t.Fatalf("after its in-flight attempt the delivery is %s", d.Status)
		}

		// A resend brings a cancelled delivery back.
		if _, err := e.svc.Resend(ctx, inFlight.ID); err != nil {
			t.Fatal(err)
		}
		e.waitStatus(t, inFlight.ID, dispatch.StatusSuccess, 10*time.Second)
	})
}

// TestSendTestIsBounded: an operator (or a script in a loop) cannot queue
// test webhooks without end ahead of an app's real events: at most
// MaxWaitingTests wait at once, the next is a Conflict, real events still
// queue, and a test that is no longer waiting makes room.
func TestSendTestIsBounded(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		clock := newFakeClock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Minute, DrainTimeout: time.Second, Now: clock.Now})
		ctx := context.Background()
		failing := newReceiver(t, always(http.StatusServiceUnavailable))
		appID, _ := e.newApp(t, failing.URL)
		var first *ent.WebhookDelivery
		for i := range webhook.MaxWaitingTests {
			d, err := e.svc.SendTest(ctx, appID, 0, "")
			if err != nil {
				t.Fatalf("test %d: %v", i+1, err)
			}
			if first == nil {
				first = d
			}
		}
		_, err := e.svc.SendTest(ctx, appID, 0, "")
		if !errors.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "waiting") {
			t.Fatalf("test %d: %v, want a conflict", webhook.MaxWaitingTests+1, err)
		}
		// The app's business events are not limited.
		if d := e.pay(t, appID); d == nil {
			t.Fatal("order.paid was not queued")
		}
		if _, err := e.svc.Cancel(ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.SendTest(ctx, appID, 0, ""); err != nil {
			t.Fatalf("after a cancel: %v", err)
		}
		n, err := e.db.Client.WebhookDelivery.Query().Where(webhookdelivery.AppID(appID), webhookdelivery.EventType(webhook.EventTest)).Count(ctx)
		if err != nil || n != webhook.MaxWaitingTests+1 {
			t.Fatalf("%d test deliveries (%v), want %d", n, err, webhook.MaxWaitingTests+1)
		}
	})
}
