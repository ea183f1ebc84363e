package webhook_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// TestManyPartnersSomeHostile: many apps at once, among them an endpoint
// that hangs, one that answers 500 forever, one that redirects (to an
// address of ours: redirects are never followed), and one that answers an
// endless body. Every healthy app's deliveries succeed while the hanging
// attempts are still in flight; the redirect target is never called; the
// endless body costs 64 KiB and a bounded attempt.
func TestManyPartnersSomeHostile(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, hangingOptions())
		stuck := hanging(t)
		stuckID, _ := e.newApp(t, stuck.URL)
		e.queue(t, stuckID, 30)

		failing := newReceiver(t, always(http.StatusInternalServerError))
		failingID, _ := e.newApp(t, failing.URL)

		var lured atomic.Int64
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { lured.Add(1) }))
		t.Cleanup(target.Close)
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/latest/meta-data/", http.StatusTemporaryRedirect)
		}))
		t.Cleanup(redirect.Close)
		redirectID, _ := e.newApp(t, redirect.URL)

		endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			chunk := []byte(strings.Repeat("x", 32<<10))
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}))
		t.Cleanup(endless.Close)
		endlessID, _ := e.newApp(t, endless.URL)

		var healthy []*receiver
		var healthyIDs []int
		for range 8 {
			r := newReceiver(t, always(http.StatusNoContent))
			id, _ := e.newApp(t, r.URL)
			healthy, healthyIDs = append(healthy, r), append(healthyIDs, id)
		}
		waitFor(t, 10*time.Second, func() bool { n, _ := stuck.concurrency(); return n == setting.PerApp },
			func() string { return "the hanging app's attempts did not start" })

		bad := map[string]int{"500": e.pay(t, failingID).ID, "redirect": e.pay(t, redirectID).ID}
		big := e.pay(t, endlessID)
		for range 5 {
			for _, id := range healthyIDs {
				e.pay(t, id)
			}
		}
		for i, r := range healthy {
			waitFor(t, 15*time.Second, func() bool { return r.count() == 5 }, func() string {
				return fmt.Sprintf("healthy app %d got %d of 5", i, r.count())
			})
		}
		if n, peak := stuck.concurrency(); n != setting.PerApp || peak != setting.PerApp {
			t.Fatalf("the hanging app has %d in flight (peak %d)", n, peak)
		}

		d := e.waitStatus(t, big.ID, dispatch.StatusSuccess, 20*time.Second)
		as := e.attempts(t, d.ID)
		if len(as) != 1 || len(as[0].ResponseBody) > sender.MaxStoredResponseBody+1024 || as[0].DurationMs > 15_000 {
			t.Fatalf("endless body: %d attempts, %d bytes stored, %d ms", len(as), len(as[0].ResponseBody), as[0].DurationMs)
		}
		for what, id := range bad {
			d := e.waitStatus(t, id, dispatch.StatusRetrying, 10*time.Second)
			if what == "redirect" && !strings.Contains(d.LastError, "307") {
				t.Errorf("redirect recorded as %q", d.LastError)
			}
		}
		if n := lured.Load(); n != 0 {
			t.Fatalf("the redirect target was called %d times", n)
		}
	})
}
