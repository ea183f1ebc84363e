package webhook_test

import (
	"context"
	"fmt"
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

const breakerGauge = "gatehouse_webhook_breaker_state"

// TestEndpointBreaker: an endpoint failing 10 attempts in a row opens its
// breaker (window 10, 50 %). While open no attempt is made and none of a
// delivery's attempts is used: waiting deliveries, and one queued while
// open, move to the half-open time (30 s later on the injected clock),
// even once their retry time has passed. Another app's endpoint is not
// affected. After the wait, trial calls go out; they succeed, the breaker
// closes, and every delivery ends SUCCESS with one attempt more.
func TestEndpointBreaker(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var healthy atomic.Bool
		rcv := newReceiver(t, func(int) int {
			if healthy.Load() {
				return http.StatusOK
			}
			return http.StatusInternalServerError
		})
		other := newReceiver(t, always(http.StatusNoContent))
		clock := newFakeClock()
		t0 := clock.Now()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Second, PollInterval: time.Hour, Now: clock.Now})
		appID, _ := e.newApp(t, rcv.URL)
		otherID, _ := e.newApp(t, other.URL)
		tick := func(d time.Duration) {
			clock.Advance(d)
			e.svc.Notify()
		}

		var ids []int
		for range 10 {
			ids = append(ids, e.pay(t, appID).ID)
		}
		waitFor(t, 15*time.Second, func() bool { return rcv.count() == 10 }, func() string {
			return fmt.Sprintf("%d of 10 first attempts", rcv.count())
		})
		// The receiver counts a request before the client has its reply.
		waitFor(t, 10*time.Second, func() bool { return e.breaker(t, appID) == outbound.StateOpen }, func() string {
			return "after 10 failures the breaker is " + e.breaker(t, appID)
		})
		if got := gauge(t, breakerGauge, appID); got != 2 {
			t.Errorf("%s{app=%d} = %v, want 2 (open)", breakerGauge, appID, got)
		}

		// Past every delivery's retry time (1 s) but before the half-open time.
		tick(20 * time.Second)
		late := e.pay(t, appID)
		ids = append(ids, late.ID)
		halfOpen := t0.Add(30 * time.Second)
		for _, id := range ids {
			waitFor(t, 10*time.Second, func() bool {
				d := e.delivery(t, id)
				return d.LeaseUntil == nil && d.NextAttemptAt.Equal(halfOpen)
			}, func() string {
				d := e.delivery(t, id)
				return fmt.Sprintf("delivery %d: next attempt %s (lease %v), want the half-open time %s", id, d.NextAttemptAt, d.LeaseUntil, halfOpen)
			})
		}
		if n := rcv.count(); n != 10 {
			t.Fatalf("the open breaker let %d attempts through", n-10)
		}
		if d := e.delivery(t, late.ID); d.RetryCount != 0 || d.AttemptCount != 0 || d.Status != dispatch.StatusPending {
			t.Fatalf("the delivery queued while open used an attempt: %+v", d)
		}
		for _, id := range ids[:10] {
			if d := e.delivery(t, id); d.RetryCount != 1 || d.Status != dispatch.StatusRetrying || len(e.attempts(t, id)) != 1 {
				t.Fatalf("delivery %d: retry %d, %s, %d attempts", id, d.RetryCount, d.Status, len(e.attempts(t, id)))
			}
		}

		// Another app's endpoint has its own breaker.
		od := e.pay(t, otherID)
		e.waitStatus(t, od.ID, dispatch.StatusSuccess, 10*time.Second)
		if got := e.breaker(t, otherID); got != outbound.StateClosed {
			t.Errorf("the other app's breaker is %s", got)
		}

		healthy.Store(true)
		tick(10 * time.Second) // the half-open time: trial calls
		for _, id := range ids {
			e.waitStatus(t, id, dispatch.StatusSuccess, 15*time.Second)
		}
		if got := e.breaker(t, appID); got != outbound.StateClosed {
			t.Errorf("after successful trials the breaker is %s", got)
		}
		if got := gauge(t, breakerGauge, appID); got != 0 {
			t.Errorf("%s{app=%d} = %v, want 0 (closed)", breakerGauge, appID, got)
		}
		if n := rcv.count(); n != 21 {
			t.Errorf("receiver got %d requests, want 21 (10 failures, 11 successes)", n)
		}
		for i, id := range ids {
			as := e.attempts(t, id)
			want := 2
			if i == 10 {
				want = 1
			}
			if len(as) != want || as[len(as)-1].AttemptNo != want || !as[len(as)-1].StartedAt.Equal(halfOpen) {
				t.Errorf("delivery %d: %d attempts, want %d, the last at the half-open time", id, len(as), want)
			}
		}
		n, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.StatusNEQ(dispatch.StatusSuccess)).Count(context.Background())
		if err != nil || n != 0 {
			t.Fatalf("%d deliveries not SUCCESS (%v)", n, err)
		}
	})
}

// TestBreakerFailedTrialReopens: a trial call that fails reopens the
// breaker for another 30 s and its delivery uses that one attempt only.
func TestBreakerFailedTrialReopens(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusBadGateway))
		clock := newFakeClock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Second, PollInterval: time.Hour, PerApp: 1, Now: clock.Now})
		appID, _ := e.newApp(t, rcv.URL)
		var ids []int
		for range 10 {
			ids = append(ids, e.pay(t, appID).ID)
		}
		waitFor(t, 15*time.Second, func() bool { return rcv.count() == 10 }, func() string { return fmt.Sprint(rcv.count(), " attempts") })
		waitFor(t, 10*time.Second, func() bool { return e.breaker(t, appID) == outbound.StateOpen }, func() string {
			return "breaker " + e.breaker(t, appID)
		})
		clock.Advance(30 * time.Second)
		e.svc.Notify()
		// One trial at a time (PerApp 1): it fails and reopens the breaker.
		waitFor(t, 10*time.Second, func() bool { return rcv.count() == 11 }, func() string { return fmt.Sprint(rcv.count(), " attempts") })
		reopened := clock.Now().Add(30 * time.Second)
		waitFor(t, 10*time.Second, func() bool {
			for _, id := range ids {
				if d := e.delivery(t, id); d.LeaseUntil != nil || d.NextAttemptAt.Before(reopened) {
					return false
				}
			}
			return true
		}, func() string { return "deliveries not moved to the next half-open time" })
		if got := e.breaker(t, appID); got != outbound.StateOpen || rcv.count() != 11 {
			t.Fatalf("breaker %s after %d attempts", got, rcv.count())
		}
	})
}
