package webhook_test

import (
	"context"
	"testing"
	"time"

	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestHeldWhileDisabledOrExpired: a disabled app's deliveries, and those of
// an app past the end of its expire date, are queued but not attempted
// (while another app's later event goes out) and not lost: they are sent
// once the app is enabled again or its expire date moves. An expire date
// of today still receives (valid through the end of that UTC day).
func TestHeldWhileDisabledOrExpired(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		held := newReceiver(t, always(200))
		appID, _ := e.newApp(t, held.URL)
		probe := newReceiver(t, always(200))
		probeID, _ := e.newApp(t, probe.URL)
		update := func(in partner.UpdateInput) {
			t.Helper()
			if _, err := e.partners.Update(ctx, appID, in); err != nil {
				t.Fatal(err)
			}
		}
		// heldNow checks that d waits, unattempted, while a later event of
		// another app is delivered (the dispatcher has looked past it).
		heldNow := func(id, received int) {
			t.Helper()
			p := e.pay(t, probeID)
			e.waitStatus(t, p.ID, dispatch.StatusSuccess, 10*time.Second)
			if d := e.delivery(t, id); d.Status != dispatch.StatusPending || d.AttemptCount != 0 || held.count() != received {
				t.Fatalf("held delivery: %s, %d attempts, receiver got %d", d.Status, d.AttemptCount, held.count())
			}
		}

		disabled := partner.Disabled
		update(partner.UpdateInput{Status: &disabled})
		d := e.pay(t, appID)
		heldNow(d.ID, 0)
		enabled := partner.Enabled
		update(partner.UpdateInput{Status: &enabled})
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)

		today := time.Now().UTC().Truncate(24 * time.Hour)
		yesterday := today.AddDate(0, 0, -1)
		update(partner.UpdateInput{ExpireDate: &yesterday})
		d = e.pay(t, appID)
		heldNow(d.ID, 1)
		update(partner.UpdateInput{ExpireDate: &today})
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		if n := held.count(); n != 2 {
			t.Fatalf("receiver got %d requests, want 2", n)
		}
	})
}

// TestHeldNotice: queuing an event for a disabled app says the delivery is
// held; for an app without a callback URL, that nothing was queued.
func TestHeldNotice(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		appID, _ := e.newApp(t, "http://127.0.0.1:1/hook")
		disabled := partner.Disabled
		if _, err := e.partners.Update(ctx, appID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		q, err := webhook.Fanout(ctx, e.db.Client, webhook.Event{AppID: appID, Type: webhook.EventTest, BizData: []byte(`{}`)})
		if err != nil || q.Delivery == nil || q.Notice == nil || q.Notice.Code != webhook.NoticeHeld {
			t.Fatalf("disabled app: %+v %v", q, err)
		}
		bare, _ := e.newApp(t, "")
		q, err = webhook.Fanout(ctx, e.db.Client, webhook.Event{AppID: bare, Type: webhook.EventTest, BizData: []byte(`{}`)})
		if err != nil || q.Delivery != nil || q.Notice == nil || q.Notice.Code != webhook.NoticeNoCallbackURL {
			t.Fatalf("app without callback: %+v %v", q, err)
		}
	})
}
