package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/partner"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/sender"
)

// slowSink answers 200 after a short pause and counts, per receiver and
// over the receivers sharing its group, the requests in flight at once
// and the webhook-ids it got.
type slowSink struct {
	*httptest.Server
	group *flight
	own   flight
	mu    sync.Mutex
	ids   map[string]int
}

type flight struct {
	mu         sync.Mutex
	now, peak  int
	afterClose int // requests that began after close
	closed     bool
}

func (f *flight) enter() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now++
	f.peak = max(f.peak, f.now)
	if f.closed {
		f.afterClose++
	}
}

func (f *flight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now--
}

func (f *flight) read() (peak, afterClose int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak, f.afterClose
}

// close marks the point after which no request may begin (see enter).
func (f *flight) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

func newSlowSink(t testing.TB, group *flight, pause time.Duration) *slowSink {
	s := &slowSink{group: group, ids: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.group.enter()
		s.own.enter()
		defer s.group.leave()
		defer s.own.leave()
		s.mu.Lock()
		s.ids[r.Header.Get(sender.HeaderID)]++
		s.mu.Unlock()
		time.Sleep(pause)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return s
}

// got returns the requests received and the distinct webhook-ids.
func (s *slowSink) got() (requests, ids int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.ids {
		requests += n
	}
	return requests, len(s.ids)
}

// TestHandoffKeepsCaps: two replicas drain a backlog of an app with two
// endpoints whose receivers answer, so on SQLite workers take the next
// delivery of their endpoint with each outcome (hand-offs; on Postgres
// there are none, and the claim loop does it all). The caps hold over
// both replicas all the while: at most 4 attempts of the app in flight,
// at most 2 (its share) per endpoint; every delivery arrives exactly
// once.
func TestHandoffKeepsCaps(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		replica := e.startService(t, storetest.OpenURL(t, e.url))
		var app flight
		ra, rb := newSlowSink(t, &app, 3*time.Millisecond), newSlowSink(t, &app, 3*time.Millisecond)
		appID, _ := e.newApp(t, ra.URL)
		e.endpoint(t, appID, rb.URL)
		const events = 80
		e.queue(t, appID, events)
		e.svc.Notify()
		replica.Notify()
		waitFor(t, 30*time.Second, func() bool {
			a, _ := ra.got()
			b, _ := rb.got()
			return a+b == 2*events
		}, func() string {
			a, _ := ra.got()
			b, _ := rb.got()
			return fmt.Sprintf("%d and %d of %d each arrived", a, b, events)
		})
		time.Sleep(100 * time.Millisecond) // nothing more may arrive
		for name, s := range map[string]*slowSink{"first": ra, "second": rb} {
			if requests, ids := s.got(); requests != events || ids != events {
				t.Errorf("%s endpoint: %d requests of %d events, want each once", name, requests, ids)
			}
			if peak, _ := s.own.read(); peak > setting.PerApp/2 {
				t.Errorf("%s endpoint: %d attempts in flight at once, want at most its share %d", name, peak, setting.PerApp/2)
			}
		}
		if peak, _ := app.read(); peak > setting.PerApp {
			t.Errorf("%d attempts of the app in flight at once, want at most %d", peak, setting.PerApp)
		}
		switch n := webhook.Handoffs(e.svc) + webhook.Handoffs(replica); {
		case b.Embedded() && n == 0:
			t.Error("no delivery was handed off: every one waited for a claim")
		case !b.Embedded() && n != 0:
			t.Errorf("%d deliveries were handed off on Postgres, which claims them all", n)
		}
	})
}

// TestHandoffStopsWhenHeld: while workers hand off an endpoint's backlog
// (SQLite; on Postgres the claim loop serves it), disabling the endpoint
// stops it at once (nothing begins after the attempts in flight), and so
// does disabling the app for its other endpoint; the rest goes out once
// they are enabled again.
func TestHandoffStopsWhenHeld(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		var app flight
		// The second endpoint answers slower, so that its backlog is
		// still there when the app is disabled (at 5 ms a quiet machine
		// sometimes drained all of it first, and the test proved nothing).
		ra, rb := newSlowSink(t, &app, 5*time.Millisecond), newSlowSink(t, &app, 40*time.Millisecond)
		appID, _ := e.newApp(t, ra.URL)
		e.endpoint(t, appID, rb.URL)
		first, err := webhook.FirstEndpoint(ctx, e.db.Client, appID)
		if err != nil {
			t.Fatal(err)
		}
		const events = 400
		e.queue(t, appID, events)
		e.svc.Notify()
		waitFor(t, 10*time.Second, func() bool { n, _ := ra.got(); return n >= 10 }, func() string { return "the backlog did not start" })
		if b.Embedded() && webhook.Handoffs(e.svc) == 0 {
			t.Fatal("no hand-off yet: the test proves nothing")
		}
		// Once the endpoint is disabled, only deliveries leased before may
		// still begin: at most its share. A worker handing off would
		// begin up to maxHandoffs more per chain.
		share := setting.PerApp / 2
		if _, err := e.svc.SetEndpointEnabled(ctx, first.ID, false); err != nil {
			t.Fatal(err)
		}
		ra.own.close()
		time.Sleep(300 * time.Millisecond)
		if _, after := ra.own.read(); after > share {
			t.Fatalf("%d attempts began at the disabled endpoint after it was disabled, want at most its share %d leased before", after, share)
		}
		disabled, enabled := partner.Disabled, partner.Enabled
		if _, err := e.partners.Update(ctx, appID, partner.UpdateInput{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		rb.own.close()
		time.Sleep(300 * time.Millisecond)
		if _, after := rb.own.read(); after > share {
			t.Fatalf("%d attempts began at an endpoint of the disabled app after it was disabled", after)
		}
		a, _ := ra.got()
		bn, _ := rb.got()
		if a == events || bn == events {
			t.Fatalf("the backlog was through before anything was disabled (%d, %d): the test proves nothing", a, bn)
		}
		if _, err := e.partners.Update(ctx, appID, partner.UpdateInput{Status: &enabled}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.SetEndpointEnabled(ctx, first.ID, true); err != nil {
			t.Fatal(err)
		}
		e.svc.Notify()
		waitFor(t, 30*time.Second, func() bool {
			a, _ := ra.got()
			b, _ := rb.got()
			return a == events && b == events
		}, func() string {
			a, _ := ra.got()
			b, _ := rb.got()
			return fmt.Sprintf("%d and %d of %d arrived after enabling again", a, b, events)
		})
	})
}

// TestHandoffKeepsToAShrunkShare: an endpoint alone in its app has the
// whole per-app cap, 4 attempts in flight, all held by its receiver.
// Enabling a second endpoint halves its share at once: as the held
// attempts are answered one by one, no worker takes the endpoint's next
// delivery by hand-off (SQLite) or claim until it is under its new share
// of 2, so it never again has more than 2 in flight, and the second
// endpoint gets the slots it gives up. (A hand-off keeps an endpoint's
// count of attempts in flight as it is, so with a share that never
// changes the caps hold without its share check, as in
// TestHandoffKeepsCaps; only the check brings an endpoint down to a share
// that shrank.)
func TestHandoffKeepsToAShrunkShare(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, hangingOptions())
		ctx := context.Background()
		held := gated(t)
		second := newReceiver(t, always(http.StatusOK))
		appID, _ := e.newApp(t, held.URL)
		secondID, _ := e.endpoint(t, appID, second.URL)
		if _, err := e.svc.SetEndpointEnabled(ctx, secondID, false); err != nil {
			t.Fatal(err)
		}
		e.queue(t, appID, 40) // all to the first endpoint: the second is disabled
		e.svc.Notify()
		inFlight := func() int { now, _ := held.concurrency(); return now }
		waitFor(t, 10*time.Second, func() bool { return inFlight() == setting.PerApp }, func() string {
			return fmt.Sprintf("%d in flight at the endpoint alone, want the whole cap %d", inFlight(), setting.PerApp)
		})

		if _, err := e.svc.SetEndpointEnabled(ctx, secondID, true); err != nil {
			t.Fatal(err)
		}
		held.resetPeak()
		before := held.count()
		const toSecond = 10
		e.queue(t, appID, toSecond)
		e.svc.Notify()
		for range 2 * setting.PerApp {
			held.answer(t)
		}
		// Were the first endpoint's workers to go on handing off its
		// deliveries, it would keep the whole cap (its requests wait for
		// answers that no longer come) and the second would get nothing.
		waitFor(t, 10*time.Second, func() bool { return second.count() == toSecond }, func() string {
			return fmt.Sprintf("%d of %d delivered to the second endpoint (the first has %d in flight)", second.count(), toSecond, inFlight())
		})
		share := setting.PerApp / 2
		if _, peak := held.concurrency(); peak > share {
			began := held.count() - before
			t.Errorf("after its share shrank, %d attempts began at the first endpoint, up to %d in flight at once: want at most its share %d",
				began, peak, share)
		}
		if b.Embedded() && webhook.Handoffs(e.svc) == 0 {
			t.Error("no delivery was handed off: the share check was not reached")
		}
	})
}
