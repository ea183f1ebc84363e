package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook/dispatch"
)

// SIGTERM under load: the process stops accepting, finishes its in-flight
// attempts (or releases them), exits 0, and loses nothing. A restart then
// delivers the rest at once — no lease is left to expire, and no attempt
// was counted as failed because of the shutdown.
func TestGracefulStopUnderLoadLosesNothing(t *testing.T) {
	const (
		total     = 300
		stopAfter = 60
	)
	pgURL := testenv.PostgresURL(t)
	bin := buildGatehouse(t)

	var (
		mu       sync.Mutex
		seen     = map[string]int{}
		answered atomic.Int64
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond) // a receiver with some latency, so attempts are in flight at SIGTERM
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
		answered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()

	db, env := queueDeliveries(t, pgURL, rcv.URL+"/hook", total)
	// No drain: with Postgres it defaults to 5 s, in which the dispatcher
	// would deliver all of them before the stop this test is about.
	env = append(env, "GATEHOUSE_SHUTDOWN_DRAIN=0s")
	succeeded := func() int { return countStatus(t, db, dispatch.StatusSuccess) }

	first := startServer(t, bin, env)
	waitFor(t, 60*time.Second, func() bool { return answered.Load() >= stopAfter }, func() string {
		return fmt.Sprintf("answered %d: the server did not get going\n%s", answered.Load(), first.logs.String())
	})
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("gatehouse after SIGTERM under load: %v\n%s", err, first.logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("gatehouse did not stop within 30 s of SIGTERM\n%s", first.logs.String())
	}
	done := succeeded()
	t.Logf("stopped with %d of %d delivered", done, total)
	if done >= total {
		t.Fatalf("all %d deliveries succeeded before the stop: nothing was tested", done)
	}
	ctx := context.Background()
	leased, err := db.WebhookDelivery.Query().Where(webhookdelivery.LeaseUntilNotNil(),
		webhookdelivery.StatusIn(dispatch.StatusPending, dispatch.StatusRetrying)).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if leased != 0 {
		t.Errorf("%d deliveries are still leased after a graceful stop: they would wait for their lease to expire", leased)
	}

	second := startServer(t, bin, env)
	restart := time.Now()
	// Well inside the 30 s lease: nothing waits for a lease to expire.
	waitFor(t, 20*time.Second, func() bool { return succeeded() == total }, func() string {
		return fmt.Sprintf("%d of %d succeeded after the restart\n%s", succeeded(), total, second.logs.String())
	})
	t.Logf("the remaining %d delivered %s after the restart", total-done, time.Since(restart).Round(time.Millisecond))
	if n, err := db.WebhookDelivery.Query().Where(webhookdelivery.RetryCountGT(0)).Count(ctx); err != nil || n != 0 {
		t.Errorf("%d deliveries counted a failed attempt because of the shutdown (%v)", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != total {
		t.Errorf("receiver saw %d distinct events, want %d", len(seen), total)
	}
}
