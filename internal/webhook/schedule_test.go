package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// firstEndpoint returns the id of app appID's first endpoint.
func (e *env) firstEndpoint(t testing.TB, appID int) int {
	t.Helper()
	ep, err := webhook.FirstEndpoint(context.Background(), e.db.Client, appID)
	if err != nil || ep == nil {
		t.Fatalf("first endpoint of app %d: %v, %v", appID, ep, err)
	}
	return ep.ID
}

// TestRetryScheduleOfEndpoint: an endpoint's retry schedule [1, 1, 1]
// makes a first attempt and three retries 1 s apart on the dispatcher's
// clock, then FAILED: four attempts, not the default's six at 1, 2, 4, 8,
// 16 s. The message's maxRetry and the delivery's say 3; no attempt is
// made before its time.
func TestRetryScheduleOfEndpoint(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusInternalServerError))
		clock := newFakeClock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Second, PollInterval: time.Hour, Now: clock.Now})
		appID, _ := e.newApp(t, rcv.URL)
		waits := []int{1, 1, 1}
		if _, err := e.svc.UpdateEndpoint(context.Background(), e.firstEndpoint(t, appID), webhook.EndpointInput{RetrySchedule: &waits}); err != nil {
			t.Fatal(err)
		}
		d := e.pay(t, appID)
		if d.MaxRetry != 3 {
			t.Errorf("the delivery's maxRetry is %d, want 3 (the schedule's retries)", d.MaxRetry)
		}
		for n := 1; n <= 4; n++ {
			waitFor(t, 10*time.Second, func() bool { return len(e.attempts(t, d.ID)) == n }, func() string {
				return fmt.Sprintf("%d attempts, want %d", len(e.attempts(t, d.ID)), n)
			})
			if n < 4 {
				got := e.waitStatus(t, d.ID, dispatch.StatusRetrying, 10*time.Second)
				as := e.attempts(t, d.ID)
				if want := as[n-1].StartedAt.Add(time.Second); !got.NextAttemptAt.Equal(want) {
					t.Fatalf("after attempt %d the next is at %s, want 1 s later (%s)", n, got.NextAttemptAt, want)
				}
				// Not yet due: nothing happens until the clock gets there.
				clock.Advance(999 * time.Millisecond)
				e.svc.Notify()
				time.Sleep(50 * time.Millisecond)
				if k := rcv.count(); k != n {
					t.Fatalf("attempt %d went out %s early", k, time.Millisecond)
				}
				clock.Advance(time.Millisecond)
				e.svc.Notify()
			}
		}
		got := e.waitStatus(t, d.ID, dispatch.StatusFailed, 10*time.Second)
		if got.RetryCount != 3 {
			t.Errorf("FAILED with retryCount %d, want 3", got.RetryCount)
		}
		clock.Advance(time.Hour)
		e.svc.Notify()
		time.Sleep(50 * time.Millisecond)
		reqs := rcv.requests()
		if len(reqs) != 4 {
			t.Fatalf("%d attempts, want 4", len(reqs))
		}
		as := e.attempts(t, d.ID)
		for i, r := range reqs {
			m := message(t, r.body)
			if m.RetryCount != i || m.MaxRetry != 3 {
				t.Errorf("attempt %d: retryCount %d maxRetry %d, want %d and 3", i+1, m.RetryCount, m.MaxRetry, i)
			}
			if i > 0 {
				if gap := as[i].StartedAt.Sub(as[i-1].StartedAt); gap != time.Second {
					t.Errorf("attempts %d and %d are %s apart, want 1s", i, i+1, gap)
				}
			}
		}
	})
}

// TestRetryAfterHonouredAndCapped: with the schedule [2, 2, 2], a 503
// with Retry-After: 5 moves the next attempt 5 s out; a 429 with
// Retry-After: 100 only 8 s (4 × the scheduled 2 s); a 500 with
// Retry-After: 100 keeps the schedule's 2 s, as does a 429 asking for
// less than the schedule (Retry-After: 0).
func TestRetryAfterHonouredAndCapped(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		replies := []struct {
			status     int
			retryAfter string
			wait       time.Duration
		}{
			{http.StatusServiceUnavailable, "5", 5 * time.Second},
			{http.StatusTooManyRequests, "100", 8 * time.Second},
			{http.StatusInternalServerError, "100", 2 * time.Second},
		}
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			i := int(n.Add(1)) - 1
			if i >= len(replies) {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			w.Header().Set("Retry-After", replies[i].retryAfter)
			w.WriteHeader(replies[i].status)
		}))
		t.Cleanup(srv.Close)
		clock := newFakeClock()
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Second, PollInterval: time.Hour, Now: clock.Now})
		appID, _ := e.newApp(t, srv.URL)
		waits := []int{2, 2, 2}
		if _, err := e.svc.UpdateEndpoint(context.Background(), e.firstEndpoint(t, appID), webhook.EndpointInput{RetrySchedule: &waits}); err != nil {
			t.Fatal(err)
		}
		d := e.pay(t, appID)
		for i, r := range replies {
			waitFor(t, 10*time.Second, func() bool {
				as := e.attempts(t, d.ID)
				return len(as) == i+1 && e.delivery(t, d.ID).AttemptCount == i+1
			}, func() string { return fmt.Sprintf("attempt %d not recorded", i+1) })
			got := e.delivery(t, d.ID)
			as := e.attempts(t, d.ID)
			if want := as[i].StartedAt.Add(r.wait); !got.NextAttemptAt.Equal(want) {
				t.Fatalf("after %d with Retry-After %s the next attempt is %s after the last, want %s",
					r.status, r.retryAfter, got.NextAttemptAt.Sub(as[i].StartedAt), r.wait)
			}
			clock.Advance(r.wait)
			e.svc.Notify()
		}
		got := e.waitStatus(t, d.ID, dispatch.StatusFailed, 10*time.Second)
		if got.AttemptCount != 4 {
			t.Fatalf("%d attempts, want 4", got.AttemptCount)
		}
	})
}

// TestCheckSchedule: the limits of a retry schedule, each refused as a
// validation error naming retrySchedule; the long preset passes them.
func TestCheckSchedule(t *testing.T) {
	ones := func(n int) []int { return make([]int, n) }
	for _, c := range []struct {
		waits []int
		want  string // "" accepted
	}{
		{nil, ""},
		{[]int{}, ""},
		{sender.LongSchedule, ""},
		{ones(19), ""},
		{ones(20), "at most 19"},
		{[]int{1, -1}, "wait 2 is -1"},
		{[]int{2592000}, ""},
		{[]int{2592000, 1}, "more than 30 days"},
		{[]int{1 << 62, 1 << 62}, "more than 30 days"},
	} {
		err := sender.CheckSchedule(c.waits)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.waits, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || errs.Field(err) != "retrySchedule" || errs.KindOf(err) != errs.Validation):
			t.Errorf("%v: %v, want a validation error of retrySchedule saying %q", c.waits, err, c.want)
		}
	}
	if _, err := sender.PresetSchedule("NIGHTLY"); errs.Field(err) != "retryPreset" {
		t.Errorf("unknown preset: %v", err)
	}
	if w, err := sender.PresetSchedule(sender.PresetLong); err != nil || len(w) != 7 || w[0] != 5 || w[6] != 36000 {
		t.Errorf("LONG is %v (%v)", w, err)
	}
}
