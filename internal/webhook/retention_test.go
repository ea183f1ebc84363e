package webhook_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// seedAged writes n deliveries of app appID with status st, last changed
// at changed, each with two attempts; it returns their ids.
func (e *env) seedAged(t testing.TB, appID, n int, st webhookdelivery.Status, changed time.Time) []int {
	t.Helper()
	ctx := context.Background()
	var ids []int
	// One transaction: a running retention job must not see a delivery
	// without its attempts.
	err := store.WithTx(ctx, e.db.Client, func(tx *ent.Tx) error {
		for range n {
			d, err := tx.WebhookDelivery.Create().SetAppID(appID).SetEventID(webhook.NewEventID()).SetEventType("test.aged").
				SetBizData(`{}`).SetCallbackURL("https://partner.example/hook").SetStatus(st).SetAttemptCount(2).
				SetNextAttemptAt(time.Now().Add(24 * time.Hour)). // not due: the dispatcher leaves it be
				SetCreateTime(changed).SetUpdateTime(changed).Save(ctx)
			if err != nil {
				return err
			}
			for no := 1; no <= 2; no++ {
				if _, err := tx.DeliveryAttempt.Create().SetDeliveryID(d.ID).SetAttemptNo(no).SetRequestHeaders("{}").
					SetRequestBody("{}").SetDurationMs(1).SetStartedAt(changed).Save(ctx); err != nil {
					return err
				}
			}
			ids = append(ids, d.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func purgedCounter(t testing.TB, table string) float64 {
	t.Helper()
	v, _ := testenv.Metric(t, "gatehouse_webhook_retention_purged_total", "table", table)
	return v
}

func (e *env) counts(t testing.TB) (deliveries, attempts int) {
	t.Helper()
	ctx := context.Background()
	d, err := e.db.WebhookDelivery.Query().Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.db.DeliveryAttempt.Query().Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return d, a
}

// TestRetentionPurge: final deliveries (SUCCESS, FAILED, CANCELLED) last
// changed before the cut-off go, with their attempts, in batches; recent
// ones and those still due (PENDING, RETRYING: held ones can be old) stay.
// Two replicas purging at once delete each row once, without errors.
func TestRetentionPurge(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		// The job (at start) must leave the seeded deliveries to Purge:
		// a retention longer than their age.
		e := newEnv(t, b, webhook.Options{Retention: 100 * setting.Retention, RetentionBatch: 3})
		appID, _ := e.newApp(t, "")
		now := time.Now().UTC()
		old, recent := now.Add(-31*24*time.Hour), now.Add(-24*time.Hour)
		var keep []int
		for _, st := range []webhookdelivery.Status{dispatch.StatusSuccess, dispatch.StatusFailed, dispatch.StatusCancelled} {
			e.seedAged(t, appID, 3, st, old)
			keep = append(keep, e.seedAged(t, appID, 1, st, recent)...)
		}
		for _, st := range []webhookdelivery.Status{dispatch.StatusPending, dispatch.StatusRetrying} {
			keep = append(keep, e.seedAged(t, appID, 2, st, old.Add(-time.Hour))...)
		}
		beforeD, beforeA := purgedCounter(t, "webhook_deliveries"), purgedCounter(t, "delivery_attempts")
		p, err := e.svc.Purge(context.Background(), now.Add(-setting.Retention))
		if err != nil || p.Deliveries != 9 || p.Attempts != 18 {
			t.Fatalf("purged %+v (%v), want 9 deliveries and 18 attempts", p, err)
		}
		if d, a := e.counts(t); d != len(keep) || a != 2*len(keep) {
			t.Fatalf("%d deliveries and %d attempts left, want %d and %d", d, a, len(keep), 2*len(keep))
		}
		for _, id := range keep {
			e.delivery(t, id)
		}
		if d, a := purgedCounter(t, "webhook_deliveries")-beforeD, purgedCounter(t, "delivery_attempts")-beforeA; d != 9 || a != 18 {
			t.Errorf("metric rose by %v deliveries and %v attempts", d, a)
		}

		// Two replicas at once.
		e.seedAged(t, appID, 40, dispatch.StatusSuccess, old)
		other := e.startService(t, storetest.OpenURL(t, e.url))
		var wg sync.WaitGroup
		results := make([]dispatch.Purged, 2)
		errs := make([]error, 2)
		for i, svc := range []*webhook.Service{e.svc, other} {
			wg.Go(func() { results[i], errs[i] = svc.Purge(context.Background(), now.Add(-setting.Retention)) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || results[0].Deliveries+results[1].Deliveries != 40 || results[0].Attempts+results[1].Attempts != 80 {
			t.Fatalf("replicas purged %+v %+v (%v, %v), want 40 deliveries in all", results[0], results[1], errs[0], errs[1])
		}
		if d, _ := e.counts(t); d != len(keep) {
			t.Fatalf("%d deliveries left, want %d", d, len(keep))
		}
	})
}

// TestRetentionJob: the background job of a started service purges old
// final deliveries by itself.
func TestRetentionJob(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{Retention: time.Hour, RetentionEvery: 20 * time.Millisecond})
		appID, _ := e.newApp(t, "")
		e.seedAged(t, appID, 5, dispatch.StatusFailed, time.Now().Add(-2*time.Hour))
		kept := e.seedAged(t, appID, 1, dispatch.StatusFailed, time.Now().Add(-30*time.Minute))
		waitFor(t, 10*time.Second, func() bool { d, a := e.counts(t); return d == 1 && a == 2 }, func() string {
			d, a := e.counts(t)
			return fmt.Sprintf("%d deliveries, %d attempts left", d, a)
		})
		e.delivery(t, kept[0])
	})
}
