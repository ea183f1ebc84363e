package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// A FAILED delivery resent goes back to PENDING with retry count 0, keeps
// its attempts, and gets delivered (to the app's current callback URL).
func TestResend(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var healthy atomic.Bool
		// 4xx failures: they do not count against the host's circuit
		// breaker, which would otherwise postpone the resent attempt.
		broken := newReceiver(t, always(http.StatusGone))
		fixed := newReceiver(t, func(int) int {
			if healthy.Load() {
				return http.StatusOK
			}
			return http.StatusUnprocessableEntity
		})
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: 5 * time.Millisecond})
		ctx := context.Background()
		appID, _ := e.newApp(t, broken.URL)
		otherID, _ := e.newApp(t, fixed.URL)
		d := e.pay(t, appID)
		d = e.waitStatus(t, d.ID, dispatch.StatusFailed, 10*time.Second)
		other := e.pay(t, otherID)
		e.waitStatus(t, other.ID, dispatch.StatusFailed, 10*time.Second)

		// The partner moves its receiver; the operator resends.
		if err := e.db.PartnerApp.UpdateOneID(appID).SetCallbackURL(fixed.URL).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if err := webhook.SyncFirstEndpoint(ctx, e.db.Client, appID); err != nil { // its endpoint follows
			t.Fatal(err)
		}
		healthy.Store(true)
		got, err := e.svc.Resend(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != d.ID || got.RetryCount != 0 || got.CallbackURL != fixed.URL || got.LastError != "" {
			t.Errorf("Resend returned %+v", got)
		}
		if got.Status != dispatch.StatusPending && got.Status != dispatch.StatusSuccess {
			t.Errorf("Resend returned status %s", got.Status)
		}
		d = e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		as := e.attempts(t, d.ID)
		if len(as) != 7 || as[6].AttemptNo != 7 || *as[6].ResponseStatus != 200 {
			t.Fatalf("%d attempts after the resend, want the 6 failed ones kept and a 7th", len(as))
		}
		var last received
		for _, r := range fixed.requests() {
			if r.header.Get("webhook-id") == d.EventID {
				last = r
			}
		}
		if m := message(t, last.body); m.RetryCount != 0 || m.CallbackURL != fixed.URL {
			t.Errorf("resent message %+v, want retryCount 0 to the new URL", m)
		}
		if _, err := e.svc.Resend(ctx, d.ID+1000); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("Resend of an unknown delivery: %v, want ErrNotFound", err)
		}
		if n := broken.count(); n != 6 {
			t.Errorf("the old receiver got %d requests, want 6", n)
		}
	})
}

// ResendFailed re-queues FAILED deliveries of one app or of all apps.
func TestResendFailed(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var healthy atomic.Bool
		rcv := newReceiver(t, func(int) int {
			if healthy.Load() {
				return http.StatusOK
			}
			return http.StatusConflict // 4xx: the breaker stays closed
		})
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: 5 * time.Millisecond})
		ctx := context.Background()
		appA, _ := e.newApp(t, rcv.URL)
		appB, _ := e.newApp(t, rcv.URL)
		var ids []int
		for _, app := range []int{appA, appA, appB} {
			ids = append(ids, e.pay(t, app).ID)
		}
		for _, id := range ids {
			e.waitStatus(t, id, dispatch.StatusFailed, 15*time.Second)
		}
		healthy.Store(true)

		missing := appB + 1000
		if _, err := e.svc.ResendFailed(ctx, webhook.ResendFilter{AppID: &missing}); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("ResendFailed of an unknown app: %v, want ErrNotFound", err)
		}
		n, err := e.svc.ResendFailed(ctx, webhook.ResendFilter{AppID: &appB})
		if err != nil || n != 1 {
			t.Fatalf("ResendFailed(app B) = %d, %v; want 1", n, err)
		}
		e.waitStatus(t, ids[2], dispatch.StatusSuccess, 10*time.Second)
		for _, id := range ids[:2] {
			if d, _ := e.db.WebhookDelivery.Get(ctx, id); d.Status != dispatch.StatusFailed {
				t.Errorf("delivery %d of app A is %s, want it left FAILED", id, d.Status)
			}
		}
		n, err = e.svc.ResendFailed(ctx, webhook.ResendFilter{})
		if err != nil || n != 2 {
			t.Fatalf("ResendFailed(all) = %d, %v; want 2", n, err)
		}
		for _, id := range ids[:2] {
			e.waitStatus(t, id, dispatch.StatusSuccess, 10*time.Second)
		}
		if n, err := e.svc.ResendFailed(ctx, webhook.ResendFilter{}); err != nil || n != 0 {
			t.Errorf("ResendFailed with nothing failed = %d, %v", n, err)
		}
	})
}

// Several dispatchers (replicas) on one database share the work: every
// delivery is made, none twice.
func TestReplicasClaimEachDeliveryOnce(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusOK))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, Workers: 4, PollInterval: 20 * time.Millisecond})
		for range 2 {
			e.startService(t, storetest.OpenURL(t, e.url))
		}
		appID, _ := e.newApp(t, rcv.URL)
		ctx := context.Background()
		const n = 150
		for range n {
			if _, err := webhook.Fanout(ctx, e.db.Client, webhook.Event{AppID: appID, Type: "test.event", BizData: []byte(`{"k":1}`)}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 60*time.Second, func() bool {
			c, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(dispatch.StatusSuccess)).Count(ctx)
			return err == nil && c == n
		}, func() string { return "not all deliveries succeeded" })
		seen := map[string]int{}
		for _, r := range rcv.requests() {
			seen[r.header.Get("webhook-id")]++
		}
		if len(seen) != n {
			t.Errorf("%d distinct events received, want %d", len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Errorf("event %s delivered %d times", id, c)
			}
		}
		if c, _ := e.db.DeliveryAttempt.Query().Count(ctx); c != n {
			t.Errorf("%d attempts stored, want %d", c, n)
		}
	})
}

// A delivery leased by a worker that died is taken over once its lease
// has run out, not before.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusOK))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
		appID, _ := e.newApp(t, rcv.URL)
		ctx := context.Background()
		// As a crashed replica leaves it: claimed, lease still running.
		leaseEnd := time.Now().Add(700 * time.Millisecond)
		d := e.queueWith(t, appID, func(tx *ent.Tx, d *ent.WebhookDelivery) error {
			return tx.WebhookDelivery.UpdateOneID(d.ID).SetLeaseUntil(leaseEnd.UTC()).Exec(ctx)
		})
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		if at := rcv.requests()[0].at; at.Before(leaseEnd) {
			t.Errorf("delivered %s before the lease ran out", leaseEnd.Sub(at))
		}
	})
}

// An attempt whose number is taken already (a worker that took the
// delivery over stored it, or the row predates attempt_count) is stored
// the careful way (recordNumbered: the delivery locked, numbered after
// the last stored attempt) and the delivery moves on.
func TestTakenAttemptNumberIsNumberedAfterTheLast(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusOK))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
		appID, _ := e.newApp(t, rcv.URL)
		ctx := context.Background()
		d := e.queueWith(t, appID, func(tx *ent.Tx, d *ent.WebhookDelivery) error {
			// attempt_count is 0: the worker numbers its attempt 1, taken.
			return tx.DeliveryAttempt.Create().SetDeliveryID(d.ID).SetAttemptNo(1).SetRequestHeaders("{}").SetRequestBody("{}").
				SetError("connection reset").SetDurationMs(1).SetStartedAt(time.Now().UTC()).Exec(ctx)
		})
		got := e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		as := e.attempts(t, d.ID)
		if len(as) != 2 || as[1].AttemptNo != 2 || as[1].ResponseStatus == nil || *as[1].ResponseStatus != http.StatusOK {
			t.Fatalf("attempts %+v, want the stored one and no 2 (200)", as)
		}
		if got.AttemptCount != 2 || got.LeaseUntil != nil {
			t.Errorf("delivery attempt_count %d lease %v, want 2 and none", got.AttemptCount, got.LeaseUntil)
		}
	})
}

// Shutdown lets an in-flight attempt finish when it can.
func TestCloseFinishesInFlightAttempt(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusOK))
		hold := make(chan struct{})
		rcv.mu.Lock()
		rcv.hold = hold
		rcv.mu.Unlock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, DrainTimeout: 10 * time.Second})
		appID, _ := e.newApp(t, rcv.URL)
		d := e.pay(t, appID)
		waitFor(t, 5*time.Second, func() bool { return rcv.count() == 1 }, func() string { return "no attempt started" })

		closed := make(chan error, 1)
		go func() { closed <- e.svc.Close(context.Background()) }()
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while an attempt was in flight", err)
		case <-time.After(100 * time.Millisecond):
		}
		close(hold)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		got, _ := e.db.WebhookDelivery.Get(context.Background(), d.ID)
		if got.Status != dispatch.StatusSuccess || len(e.attempts(t, d.ID)) != 1 {
			t.Errorf("after Close: %s with %d attempts, want SUCCESS with 1", got.Status, len(e.attempts(t, d.ID)))
		}
	})
}

// Shutdown does not wait beyond its bound: the attempt is cut short, not
// counted, and its lease released, so the next dispatcher delivers it
// at once.
func TestCloseReleasesStuckAttempt(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusOK))
		hold := make(chan struct{})
		rcv.mu.Lock()
		rcv.hold = hold
		rcv.mu.Unlock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, DrainTimeout: 200 * time.Millisecond, PollInterval: time.Hour})
		appID, _ := e.newApp(t, rcv.URL)
		d := e.pay(t, appID)
		waitFor(t, 5*time.Second, func() bool { return rcv.count() == 1 }, func() string { return "no attempt started" })

		start := time.Now()
		if err := e.svc.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("Close took %s with a drain bound of 200ms", took)
		}
		got, _ := e.db.WebhookDelivery.Get(context.Background(), d.ID)
		if got.Status != dispatch.StatusPending || got.LeaseUntil != nil || got.RetryCount != 0 || len(e.attempts(t, d.ID)) != 0 {
			t.Fatalf("after Close: %s lease %v retry %d attempts %d; want PENDING, released, uncounted",
				got.Status, got.LeaseUntil, got.RetryCount, len(e.attempts(t, d.ID)))
		}

		close(hold)
		e.startService(t, e.db) // the next start (poll interval one hour: no waiting for a lease)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 5*time.Second)
		if n := rcv.count(); n != 2 {
			t.Errorf("receiver got %d requests, want 2 (at-least-once)", n)
		}
	})
}

// queueWith queues a test.event delivery for appID and, in the same
// transaction, lets change alter what a crashed or older replica would
// have left; then it wakes the dispatcher.
func (e *env) queueWith(t testing.TB, appID int, change func(tx *ent.Tx, d *ent.WebhookDelivery) error) *ent.WebhookDelivery {
	t.Helper()
	ctx := context.Background()
	tx, err := e.db.Tx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q, err := webhook.Fanout(ctx, tx.Client(), webhook.Event{AppID: appID, Type: "test.event", BizData: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	d := q.Delivery
	if err := change(tx, d); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	e.svc.Notify()
	return d
}
