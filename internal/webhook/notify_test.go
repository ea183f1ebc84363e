package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestWakeUpWithoutPolling: with a poll interval of an hour, only wake-ups
// can make work go out quickly. On SQLite the process that queues the
// work wakes its own dispatcher. On Postgres two replicas share the
// database: work queued, re-sent or released (an app enabled again) on
// replica A — whose dispatcher does not run — is delivered by replica B,
// woken by LISTEN/NOTIFY; and B's listener survives its connection being
// killed.
func TestWakeUpWithoutPolling(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		opt := webhook.Options{AllowPrivate: true, PollInterval: time.Hour}
		e := newEnv(t, b, opt)
		rcv := newReceiver(t, always(200))
		appID, _ := e.newApp(t, rcv.URL)
		if b.Embedded() {
			d := e.pay(t, appID)
			e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
			t.Logf("in-process wake-up: first attempt %s after the event", rcv.requests()[0].at.Sub(d.CreateTime))
			return
		}
		// e.svc is replica B. Replica A queues through its own client; its
		// webhook service exists (the hooks that announce work) but its
		// dispatcher is not started.
		dbA := storetest.OpenURL(t, e.url)
		svcA, err := webhook.NewService(dbA, e.masterKey, slog.New(slog.DiscardHandler), e.opt)
		if err != nil {
			t.Fatal(err)
		}
		svcA.WakeOnCommit(dbA.Client)
		ordersA := order.NewService(dbA)
		partnersA, err := partner.NewService(dbA.Client, e.masterKey)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		payOn := func(orders *order.Service) int {
			t.Helper()
			no := "SO-" + testenv.RandomSuffix()
			if _, err := orders.Create(ctx, order.CreateInput{AppID: appID, OrderNo: no, Amount: "1.00"}); err != nil {
				t.Fatal(err)
			}
			if _, err := orders.Pay(ctx, no); err != nil {
				t.Fatal(err)
			}
			return rcv.count()
		}
		waitReceived := func(n int, what string) {
			t.Helper()
			waitFor(t, 10*time.Second, func() bool { return rcv.count() == n }, func() string { return what + ": not delivered by replica B" })
		}

		before := payOn(ordersA)
		waitReceived(before+1, "an event queued on replica A")
		r := rcv.requests()[before]
		t.Logf("replica A's event → replica B's first attempt: %s", r.at.Sub(time.UnixMilli(message(t, r.body).CreateTime)))

		// A delivery resent on A (its dispatcher is not running).
		first := e.db.WebhookDelivery.Query().FirstIDX(ctx)
		if _, err := svcA.Resend(ctx, first); err != nil {
			t.Fatal(err)
		}
		waitReceived(before+2, "a resend on replica A")

		// Held while disabled on A, released when A enables the app again.
		disabled, enabled := partner.Disabled, partner.Enabled
		if _, err := partnersA.Update(ctx, appID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		payOn(ordersA)
		if _, err := partnersA.Update(ctx, appID, partner.UpdateInput{Status: &enabled}); err != nil {
			t.Fatal(err)
		}
		waitReceived(before+3, "a held delivery released on replica A")

		// B's LISTEN connection is killed: it reconnects and hears again.
		killListeners(t, e.db)
		payOn(ordersA)
		waitReceived(before+4, "an event after B's listener reconnected")
	})
}

// killListeners terminates the sessions of this test's database that
// wait in LISTEN (the test's own database: other tests are untouched).
func killListeners(t *testing.T, db *store.DB) {
	t.Helper()
	var n int
	err := db.SQL.QueryRowContext(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`).Scan(&n)
	if err != nil || n == 0 {
		t.Fatalf("killed %d LISTEN sessions (%v)", n, err)
	}
}

// TestRetryTimerWithoutPolling: with a poll interval of an hour, a retry
// still goes out when it is due: the loop sleeps until the next due time
// (read from the database), not until the next poll.
func TestRetryTimerWithoutPolling(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, PollInterval: time.Hour, RetryBase: 50 * time.Millisecond})
		rcv := newReceiver(t, func(n int) int {
			if n < 3 {
				return 503
			}
			return 200
		})
		appID, _ := e.newApp(t, rcv.URL)
		d := e.pay(t, appID)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		if n := rcv.count(); n != 3 {
			t.Fatalf("%d attempts, want 3", n)
		}
	})
}

// TestNextDueCountsFromTheClaim: a delivery that becomes due after the
// dispatch loop's claim looked, but before the loop asks when the next one
// is due, must still be found (wait 0), not slept past until the poll
// interval. The loop asks with its claim's clock; asked with the later
// clock instead, the delivery falls between the two and the answer is the
// poll interval (what a busy machine showed in TestRetryTimerWithoutPolling).
func TestNextDueCountsFromTheClaim(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		// The running dispatcher lives an hour in the past: it never finds
		// the delivery due, so the row stays as this test sets it.
		past := time.Now().Add(-time.Hour)
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, PollInterval: time.Hour, Now: func() time.Time { return past }})
		appID, _ := e.newApp(t, "http://127.0.0.1:9/hook")
		d := e.pay(t, appID)
		claimedAt := time.Now().UTC().Truncate(time.Millisecond)
		due := claimedAt.Add(50 * time.Millisecond)
		if err := e.db.WebhookDelivery.UpdateOneID(d.ID).SetStatus(webhookdelivery.StatusRETRYING).SetRetryCount(1).
			SetNextAttemptAt(due).ClearLeaseUntil().Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		later := claimedAt.Add(100 * time.Millisecond)
		log := slog.New(slog.DiscardHandler)
		s, err := webhook.NewService(e.db, e.masterKey, log, withSettings(webhook.Options{AllowPrivate: true, PollInterval: time.Hour, Now: func() time.Time { return later }}))
		if err != nil {
			t.Fatal(err)
		}
		if got := webhook.UntilNextDue(s, claimedAt); got != 0 {
			t.Fatalf("after a claim at %s, with the delivery due at %s and the clock at %s: wait %s, want 0", claimedAt, due, later, got)
		}
		if got := webhook.UntilNextDue(s, later); got != time.Hour {
			t.Fatalf("counting from now, past the due time: wait %s, want the poll interval (the gap this rule closes)", got)
		}
	})
}

// TestTransactionsAnnounceOnceAndAreForgotten: a transaction that queues
// deliveries for five endpoints announces its work once (one commit
// hook, one NOTIFY), and once it has committed or rolled back nothing
// remembers it. Each call of a mutation's Tx method makes a new *ent.Tx:
// remembered by that pointer, every queued row added a hook and a NOTIFY,
// and every transaction that queued one — with its request — stayed in
// memory for good (a fan-out of 10,000 events held 180 MiB live).
func TestTransactionsAnnounceOnceAndAreForgotten(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, PollInterval: time.Hour})
		ctx := context.Background()
		rcv := newReceiver(t, always(200))
		appID, _ := e.newApp(t, rcv.URL)
		for i := range 4 {
			e.endpoint(t, appID, fmt.Sprintf("%s/%d", rcv.URL, i))
		}
		queue := func(commit bool) {
			t.Helper()
			tx, err := e.db.Client.Tx(ctx)
			if err != nil {
				t.Fatal(err)
			}
			q, err := webhook.Fanout(ctx, tx.Client(), webhook.Event{ID: webhook.NewEventID(), AppID: appID, Type: order.EventPaid, BizData: []byte(`{"orderNo":"SO-1"}`)})
			if err != nil || len(q.Deliveries) != 5 {
				t.Fatalf("queued %d deliveries (%v), want 5", len(q.Deliveries), err)
			}
			if n := webhook.Announcing(e.svc); n != 1 {
				t.Errorf("a transaction that queued 5 deliveries announces %d times, want once", n)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := webhook.Announcing(e.svc); n != 0 {
				t.Errorf("after the transaction ended (commit %v) %d are still remembered, want none", commit, n)
			}
		}
		queue(false)
		queue(true)
		// The commit still wakes the dispatcher (the poll is an hour away).
		waitFor(t, 10*time.Second, func() bool { return rcv.count() == 5 }, func() string {
			return fmt.Sprintf("%d of 5 deliveries received after the commit", rcv.count())
		})

		// Many at once, through Publish's own transactions.
		declareInvoice(t, e)
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				body := json.RawMessage(fmt.Sprintf(`{"invoice_no":"I-%d","lines":[{"sku":"A","qty":1}]}`, i))
				if _, err := e.svc.Publish(ctx, appID, "invoice.issued", body, ""); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := webhook.Announcing(e.svc); n != 0 {
			t.Errorf("after 40 parallel publications %d transactions are still remembered, want none", n)
		}
		waitFor(t, 20*time.Second, func() bool { return rcv.count() == 5+40*5 }, func() string {
			return fmt.Sprintf("%d of %d deliveries received", rcv.count(), 5+40*5)
		})
	})
}
