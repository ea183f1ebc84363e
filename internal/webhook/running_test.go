package webhook_test

import (
	"context"
	"database/sql"
	"net/http"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/order"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestOutcomeWritesDoNotHoldRequests: a worker's running token covers its
// HTTP exchange, not the writing of the outcome. With one worker and two
// deliveries claimed together, while the first one's outcome cannot be
// written (the rows are locked on Postgres; the database's one write lock
// is held on SQLite), the second still goes out; both are recorded once
// the lock goes.
func TestOutcomeWritesDoNotHoldRequests(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, Workers: 1, PollInterval: time.Hour})
		ctx := context.Background()
		var (
			mu     sync.Mutex
			lock   *sql.Tx
			lockAt time.Time
			ids    []int
		)
		rcv := newReceiver(t, func(n int) int {
			if n != 1 {
				return http.StatusOK
			}
			// The first request: lock the deliveries' rows before
			// answering, so that its outcome waits for the lock.
			mu.Lock()
			defer mu.Unlock()
			tx, err := e.db.SQL.BeginTx(ctx, nil)
			if err != nil {
				t.Error(err)
				return http.StatusOK
			}
			q := `UPDATE webhook_deliveries SET update_time = update_time WHERE id IN ($1, $2)`
			if !b.Embedded() {
				q = `SELECT id FROM webhook_deliveries WHERE id IN ($1, $2) FOR UPDATE`
			}
			if _, err := tx.ExecContext(ctx, q, ids[0], ids[1]); err != nil {
				t.Error(err)
			}
			lock, lockAt = tx, time.Now()
			return http.StatusOK
		})
		appA, _ := e.newApp(t, rcv.URL+"/a")
		appB, _ := e.newApp(t, rcv.URL+"/b")

		// Both queued in one transaction: one wake-up, one claim of both.
		tx, err := e.db.Client.Tx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		qa, err := webhook.Fanout(ctx, tx.Client(), webhook.Event{ID: webhook.NewEventID(), AppID: appA, Type: order.EventPaid, BizData: []byte(`{"orderNo":"SO-A"}`)})
		if err != nil {
			t.Fatal(err)
		}
		qb, err := webhook.Fanout(ctx, tx.Client(), webhook.Event{ID: webhook.NewEventID(), AppID: appB, Type: order.EventPaid, BizData: []byte(`{"orderNo":"SO-B"}`)})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ids = []int{qa.Deliveries[0].ID, qb.Deliveries[0].ID}
		mu.Unlock()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}

		waitFor(t, 10*time.Second, func() bool { return rcv.count() == 2 }, func() string {
			return "the second delivery did not go out while the first one's outcome waited for its write: the one worker was held by the write"
		})
		mu.Lock()
		held := lock
		if held == nil {
			mu.Unlock()
			t.Fatal("A's receiver never took the lock")
		}
		if at := rcv.requests()[1].at; at.Before(lockAt) {
			t.Errorf("the second delivery went out %s before the first one's outcome was locked out: the test did not test", lockAt.Sub(at))
		}
		if !b.Embedded() { // (on SQLite the lock holds the store's writer: no read here)
			for _, id := range ids {
				if d := e.delivery(t, id); d.Status != dispatch.StatusPending {
					t.Errorf("delivery %d is %s while its write is locked out, want it still PENDING", id, d.Status)
				}
			}
		}
		_ = held.Rollback()
		mu.Unlock()
		for _, id := range ids {
			e.waitStatus(t, id, dispatch.StatusSuccess, 10*time.Second)
			if n := len(e.attempts(t, id)); n != 1 {
				t.Errorf("delivery %d has %d attempts, want 1", id, n)
			}
		}
	})
}
