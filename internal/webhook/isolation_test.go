package webhook_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/outbound"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// queue writes n deliveries for app appID in one transaction.
func (e *env) queue(t testing.TB, appID, n int) {
	t.Helper()
	ctx := context.Background()
	err := store.WithTx(ctx, e.db.Client, func(tx *ent.Tx) error {
		for i := range n {
			if _, err := webhook.Fanout(ctx, tx.Client(), webhook.Event{AppID: appID, Type: "test.backlog", BizData: fmt.Appendf(nil, `{"n":%d}`, i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hangingOptions: attempts that hang stay in flight for the whole test
// (the read timeout is longer than the test), so isolation is seen in the
// structure, not in timings.
func hangingOptions() webhook.Options {
	oc := outbound.DefaultConfig()
	oc.ReadTimeout = time.Minute
	oc.ReplyTimeout = time.Minute
	return webhook.Options{AllowPrivate: true, AttemptTimeout: 2 * time.Minute, Lease: 3 * time.Minute, DrainTimeout: time.Second, Outbound: &oc}
}

// TestHangingAppsDoNotDelayOthers: three apps whose endpoints hang, with
// 100 deliveries queued each, hold at most 4 attempts in flight each (12
// of the 16 workers); a healthy app's events are delivered one after the
// other meanwhile, each while every hanging attempt is still in flight
// and no further one has started. The healthy app's event → first
// attempt delays are logged (the p99 under this load is measured by
// make bench).
func TestHangingAppsDoNotDelayOthers(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, hangingOptions())
		var stuck []*receiver
		for range 3 {
			r := hanging(t)
			id, _ := e.newApp(t, r.URL)
			e.queue(t, id, 100)
			stuck = append(stuck, r)
		}
		for i, r := range stuck {
			waitFor(t, 10*time.Second, func() bool { n, _ := r.concurrency(); return n == setting.PerApp }, func() string {
				n, peak := r.concurrency()
				return fmt.Sprintf("hanging app %d: %d in flight (peak %d), want %d", i, n, peak, setting.PerApp)
			})
		}
		healthy := newReceiver(t, always(200))
		appID, _ := e.newApp(t, healthy.URL)
		var delays []time.Duration
		for i := range 20 {
			d := e.pay(t, appID)
			// A generous bound that proves isolation, not speed: a hanging
			// attempt would hold this one for a minute.
			waitFor(t, 10*time.Second, func() bool { return healthy.count() == i+1 }, func() string {
				return fmt.Sprintf("healthy event %d not delivered", i+1)
			})
			delays = append(delays, healthy.requests()[i].at.Sub(d.CreateTime))
			for j, r := range stuck {
				if n, peak := r.concurrency(); n != setting.PerApp || peak != setting.PerApp || r.count() != setting.PerApp {
					t.Fatalf("hanging app %d: %d in flight, peak %d, %d requests: want exactly %d, all still hanging", j, n, peak, r.count(), setting.PerApp)
				}
			}
		}
		slices.Sort(delays)
		t.Logf("healthy app, event → first attempt while 3 apps hang with 300 deliveries queued: min %s, p50 %s, max %s",
			delays[0], delays[len(delays)/2], delays[len(delays)-1])
	})
}

// TestPerAppCapAcrossReplicas: two replicas on one database keep one app
// at 4 attempts in flight in total (the claim counts live leases of every
// replica under the app's row lock), while each replica still serves
// another app.
func TestPerAppCapAcrossReplicas(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, hangingOptions())
		second := storetest.OpenURL(t, e.url)
		replica := e.startService(t, second)
		r := hanging(t)
		id, _ := e.newApp(t, r.URL)
		e.queue(t, id, 50)
		replica.Notify()
		waitFor(t, 10*time.Second, func() bool { n, _ := r.concurrency(); return n == setting.PerApp }, func() string {
			n, peak := r.concurrency()
			return fmt.Sprintf("%d in flight (peak %d)", n, peak)
		})
		healthy := newReceiver(t, always(200))
		other, _ := e.newApp(t, healthy.URL)
		for range 10 {
			e.pay(t, other)
		}
		waitFor(t, 10*time.Second, func() bool { return healthy.count() == 10 }, func() string { return fmt.Sprint(healthy.count(), " of 10 delivered") })
		// Each event woke the replicas (NOTIFY on Postgres), and each claim
		// round saw the hanging app's due rows: none took a fifth.
		if n, peak := r.concurrency(); n != setting.PerApp || peak != setting.PerApp {
			t.Fatalf("%d in flight, peak %d: want at most %d over both replicas", n, peak, setting.PerApp)
		}
	})
}
