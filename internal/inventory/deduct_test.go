package inventory_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"gatehouse/ent"
	"gatehouse/internal/errs"
	"gatehouse/internal/inventory"
	"gatehouse/internal/inventory/inventorytest"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

const appA, appB = "app-a", "app-b"

func in(bizNo string, sku int, q int64) inventory.DeductInput {
	return inventory.DeductInput{BizNo: bizNo, SkuID: sku, Quantity: q}
}

func TestDeductSucceedsOnceAndReplays(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		ctx := context.Background()
		s := mustSku(t, svc, 10)

		res, err := svc.Deduct(ctx, appA, in("B-1", s.ID, 3))
		want := inventory.Deduction{BizNo: "B-1", SkuID: s.ID, Quantity: 3, RemainingStock: 7}
		if err != nil || res.Deduction != want || res.Replayed {
			t.Fatalf("Deduct = %+v, %v; want %+v", res, err, want)
		}
		rec := recordOf(t, db, "B-1")
		if rec == nil || rec.Status != inventory.StatusSucceeded || rec.AppKey != appA || rec.APIPath != inventory.APIPath {
			t.Fatalf("record = %+v", rec)
		}
		if wantParams := fmt.Sprintf(`{"biz_no":"B-1","quantity":3,"sku_id":%d}`, s.ID); rec.RequestParams != wantParams {
			t.Fatalf("request_params = %s, want %s", rec.RequestParams, wantParams)
		}
		var stored inventory.Deduction
		if err := json.Unmarshal([]byte(rec.ResponseResult), &stored); err != nil || stored != want {
			t.Fatalf("response_result = %s (%v)", rec.ResponseResult, err)
		}

		for range 3 {
			again, err := svc.Deduct(ctx, appA, in("B-1", s.ID, 3))
			if err != nil || again.Deduction != want || !again.Replayed {
				t.Fatalf("repeat = %+v, %v", again, err)
			}
		}
		if got := stockOf(t, db, s.ID); got != 7 {
			t.Fatalf("stock %d after repeats, want 7 (one deduction)", got)
		}
		// A later deduction reports the stock it left.
		res, err = svc.Deduct(ctx, appA, in("B-2", s.ID, 7))
		if err != nil || res.RemainingStock != 0 {
			t.Fatalf("second deduction = %+v, %v", res, err)
		}
		if n := recordCount(t, db); n != 2 {
			t.Fatalf("%d records, want 2", n)
		}
	})
}

func TestDeductBusinessFailures(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		ctx := context.Background()
		s := mustSku(t, svc, 2)

		if _, err := svc.Deduct(ctx, appA, in("short", s.ID, 3)); !errors.Is(err, inventory.ErrInsufficientStock) {
			t.Fatalf("insufficient: %v", err)
		}
		if _, err := svc.Deduct(ctx, appA, in("nosku", s.ID+100, 1)); !errors.Is(err, inventory.ErrNotFound) {
			t.Fatalf("unknown sku: %v", err)
		}
		for _, biz := range []string{"short", "nosku"} {
			rec := recordOf(t, db, biz)
			if rec == nil || rec.Status != inventory.StatusFailed || rec.ResponseResult != "" {
				t.Fatalf("record %s = %+v, want status 2 without a result", biz, rec)
			}
		}
		if got := stockOf(t, db, s.ID); got != 2 {
			t.Fatalf("stock %d, want 2", got)
		}
		// Repeats of a failure answer "business failed" even once the stock
		// or the SKU would allow them: the outcome is fixed.
		if _, err := svc.SetStock(ctx, s.ID, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Deduct(ctx, appA, in("short", s.ID, 3)); !errors.Is(err, inventory.ErrBusinessFailed) {
			t.Fatalf("repeat of insufficient: %v", err)
		}
		if _, err := svc.Deduct(ctx, appA, in("nosku", s.ID+100, 1)); !errors.Is(err, inventory.ErrBusinessFailed) {
			t.Fatalf("repeat of unknown sku: %v", err)
		}
		if got := stockOf(t, db, s.ID); got != 100 {
			t.Fatalf("stock %d, want 100", got)
		}
		// Exactly the stock is fine; never below zero.
		if res, err := svc.Deduct(ctx, appA, in("all", s.ID, 100)); err != nil || res.RemainingStock != 0 {
			t.Fatalf("deduct all = %+v, %v", res, err)
		}
		if _, err := svc.Deduct(ctx, appA, in("one-more", s.ID, 1)); !errors.Is(err, inventory.ErrInsufficientStock) {
			t.Fatalf("deduct from 0: %v", err)
		}
	})
}

func TestDeductRepeatMismatches(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		ctx := context.Background()
		s := mustSku(t, svc, 10)
		other := mustSku(t, svc, 10)
		if _, err := svc.Deduct(ctx, appA, in("M-1", s.ID, 2)); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Deduct(ctx, appA, in("M-failed", s.ID, 50)); !errors.Is(err, inventory.ErrInsufficientStock) {
			t.Fatal(err)
		}
		cases := []struct {
			app  string
			in   inventory.DeductInput
			want error
		}{
			{appA, in("M-1", s.ID, 3), inventory.ErrParamsMismatch},
			{appA, in("M-1", other.ID, 2), inventory.ErrParamsMismatch},
			{appA, in("M-failed", s.ID, 49), inventory.ErrParamsMismatch},
			{appB, in("M-1", s.ID, 2), inventory.ErrForbidden},
			{appB, in("M-1", other.ID, 5), inventory.ErrForbidden},
			{appB, in("M-failed", s.ID, 50), inventory.ErrForbidden},
		}
		for _, c := range cases {
			if _, err := svc.Deduct(ctx, c.app, c.in); !errors.Is(err, c.want) {
				t.Fatalf("%s %+v: %v, want %v", c.app, c.in, err, c.want)
			}
		}
		if stockOf(t, db, s.ID) != 8 || stockOf(t, db, other.ID) != 10 {
			t.Fatal("a refused repeat changed stock")
		}
		if n := recordCount(t, db); n != 2 {
			t.Fatalf("%d records, want 2", n)
		}
		if rec := recordOf(t, db, "M-1"); rec.AppKey != appA || rec.Status != inventory.StatusSucceeded {
			t.Fatalf("record changed: %+v", rec)
		}
	})
}

func TestDeductValidatesBeforeRecording(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		s := mustSku(t, svc, 10)
		for _, bad := range []inventory.DeductInput{
			in("", s.ID, 1),
			in("x\x00", s.ID, 1),
			in("B", 0, 1),
			in("B", s.ID, 0),
			in("B", s.ID, inventory.MaxQuantity+1),
		} {
			if _, err := svc.Deduct(context.Background(), appA, bad); errs.KindOf(err) != errs.Validation {
				t.Fatalf("%+v: %v, want a validation error", bad, err)
			}
		}
		if n := recordCount(t, db); n != 0 {
			t.Fatalf("invalid requests left %d records", n)
		}
		if stockOf(t, db, s.ID) != 10 {
			t.Fatal("invalid requests changed stock")
		}
	})
}

// A caller that hung up (or whose deadline passed) gets nothing done: the
// work runs under its context, and a cancelled deduction leaves no record
// and no deduction, so the same biz_no can run again.
func TestDeductCancelledLeavesNothing(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		s := mustSku(t, svc, 10)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := svc.Deduct(ctx, appA, in("C-1", s.ID, 4)); !errors.Is(err, errs.Unavailable) {
			t.Fatalf("Deduct with a cancelled context = %v, want a dependency failure", err)
		}
		if rec := recordOf(t, db, "C-1"); rec != nil || stockOf(t, db, s.ID) != 10 {
			t.Fatalf("record %+v, stock %d after a cancelled deduction", rec, stockOf(t, db, s.ID))
		}
		if res, err := svc.Deduct(context.Background(), appA, in("C-1", s.ID, 4)); err != nil || res.RemainingStock != 6 {
			t.Fatalf("retry = %+v, %v", res, err)
		}
	})
}

// An unexpected error raised inside the deduction, after the decrement:
// the decrement is rolled back, the biz_no is recorded as failed, and
// repeats answer "business failed".
func TestDeductFaultAfterDecrement(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		ctx := context.Background()
		s := mustSku(t, svc, 10)
		remove := inventorytest.FailDecrement(t, db, s.ID, "injected fault 5b2d")
		_, err := svc.Deduct(ctx, appA, in("F-1", s.ID, 4))
		if err == nil || !strings.Contains(err.Error(), "injected fault 5b2d") || errors.Is(err, errs.Unavailable) {
			t.Fatalf("Deduct = %v, want the injected fault as an unexpected error", err)
		}
		if got := stockOf(t, db, s.ID); got != 10 {
			t.Fatalf("stock %d after a fault, want 10 (rolled back)", got)
		}
		rec := recordOf(t, db, "F-1")
		if rec == nil || rec.Status != inventory.StatusFailed || rec.ResponseResult != "" {
			t.Fatalf("record = %+v, want status 2", rec)
		}
		remove()
		if _, err := svc.Deduct(ctx, appA, in("F-1", s.ID, 4)); !errors.Is(err, inventory.ErrBusinessFailed) {
			t.Fatalf("repeat after fault: %v", err)
		}
		if res, err := svc.Deduct(ctx, appA, in("F-2", s.ID, 4)); err != nil || res.RemainingStock != 6 {
			t.Fatalf("next deduction = %+v, %v", res, err)
		}
	})
}

// A failing commit: the whole transaction is gone and nothing is
// recorded (the outcome was not committed: a dependency failure, 503);
// the same biz_no retried later runs anew and succeeds. (Postgres: the
// commit is made to fail by a deferred trigger; SQLite has none.)
func TestDeductFaultAtCommit(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		if b.Embedded() {
			t.Skip("SQLite has no deferred triggers to fail a commit with")
		}
		svc, db := newService(t, b)
		ctx := context.Background()
		s := mustSku(t, svc, 10)
		remove := inventorytest.FailCommit(t, db, "K-")
		for _, c := range []struct {
			biz string
			q   int64
		}{{"K-ok", 4}, {"K-short", 400}} {
			if _, err := svc.Deduct(ctx, appA, in(c.biz, s.ID, c.q)); !errors.Is(err, errs.Unavailable) {
				t.Fatalf("%s: %v, want the failed commit as a dependency failure", c.biz, err)
			}
			if rec := recordOf(t, db, c.biz); rec != nil {
				t.Fatalf("%s: record = %+v, want none", c.biz, rec)
			}
		}
		if got := stockOf(t, db, s.ID); got != 10 {
			t.Fatalf("stock %d, want 10", got)
		}
		remove()
		if res, err := svc.Deduct(ctx, appA, in("K-ok", s.ID, 4)); err != nil || res.Replayed || res.RemainingStock != 6 {
			t.Fatalf("retry: %+v, %v", res, err)
		}
	})
}

// TestDeductDependencyFailureRecordsNothing: the SKU row is locked by
// another transaction past the request's deadline. The deduction answers
// a dependency failure (503 to the partner) and leaves no record and no
// deduction behind, not even once the lock is gone and the database runs
// what it was sent; the same biz_no then succeeds. On Postgres the same
// holds for a deduction that stalls inside the database after its
// decrement.
func TestDeductDependencyFailureRecordsNothing(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		s := mustSku(t, svc, 10)
		locker, err := db.SQL.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		lock := "SELECT stock FROM skus WHERE id = $1 FOR UPDATE"
		if b.Embedded() {
			// SQLite locks the whole database for the one writer.
			lock = "UPDATE skus SET stock = stock WHERE id = ? RETURNING stock"
		}
		var stock int64
		if err := locker.QueryRowContext(context.Background(), lock, s.ID).Scan(&stock); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err = svc.Deduct(ctx, appA, in("LOCKED-1", s.ID, 4))
		cancel()
		if !errors.Is(err, errs.Unavailable) {
			t.Fatalf("Deduct past the deadline = %v, want a dependency failure", err)
		}
		if err := locker.Rollback(); err != nil {
			t.Fatal(err)
		}
		if !b.Embedded() {
			// The statement still waits for the row on the server and runs
			// once the lock is gone: it must not commit.
			inventorytest.WaitForIdle(t, db)
		}
		if rec := recordOf(t, db, "LOCKED-1"); rec != nil || stockOf(t, db, s.ID) != 10 {
			t.Fatalf("record = %+v, stock %d after a dependency failure, want none and 10", rec, stockOf(t, db, s.ID))
		}
		res, err := svc.Deduct(context.Background(), appA, in("LOCKED-1", s.ID, 4))
		if err != nil || res.Replayed || res.RemainingStock != 6 || stockOf(t, db, s.ID) != 6 {
			t.Fatalf("retry after the lock: %+v, %v (stock %d)", res, err, stockOf(t, db, s.ID))
		}
		if rec := recordOf(t, db, "LOCKED-1"); rec == nil || rec.Status != inventory.StatusSucceeded {
			t.Fatalf("record = %+v, want status 1", rec)
		}
		if b.Embedded() {
			return
		}

		remove := inventorytest.StallDecrement(t, db, s.ID, time.Second)
		ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err = svc.Deduct(ctx, appA, in("DEP-1", s.ID, 1))
		cancel()
		if !errors.Is(err, errs.Unavailable) {
			t.Fatalf("a deduction stalled in the database: %v, want a dependency failure", err)
		}
		inventorytest.WaitForIdle(t, db) // the stalled statement has ended
		remove()
		if rec := recordOf(t, db, "DEP-1"); rec != nil || stockOf(t, db, s.ID) != 6 {
			t.Fatalf("record %+v, stock %d after a stalled deduction", rec, stockOf(t, db, s.ID))
		}
		if res, err := svc.Deduct(context.Background(), appA, in("DEP-1", s.ID, 1)); err != nil || res.Replayed || res.RemainingStock != 5 {
			t.Fatalf("retry: %+v, %v", res, err)
		}
	})
}

// run calls fn n times at once and returns the results in order.
func concurrently[T any](n int, fn func(i int) T) []T {
	out := make([]T, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

type outcome struct {
	res inventory.Result
	err error
}

func TestDeductConcurrentDistinct(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		s := mustSku(t, svc, 30)
		outs := concurrently(50, func(i int) outcome {
			r, err := svc.Deduct(context.Background(), appA, in(fmt.Sprintf("D-%02d", i), s.ID, 1))
			return outcome{r, err}
		})
		ok, short := 0, 0
		remaining := map[int64]bool{}
		for i, o := range outs {
			switch {
			case o.err == nil:
				ok++
				if remaining[o.res.RemainingStock] {
					t.Fatalf("two deductions left %d", o.res.RemainingStock)
				}
				remaining[o.res.RemainingStock] = true
			case errors.Is(o.err, inventory.ErrInsufficientStock):
				short++
			default:
				t.Fatalf("request %d: %v", i, o.err)
			}
		}
		if ok != 30 || short != 20 {
			t.Fatalf("%d succeeded, %d insufficient; want 30 and 20", ok, short)
		}
		for r := range int64(30) {
			if !remaining[r] {
				t.Fatalf("no deduction left %d: %v", r, remaining)
			}
		}
		if got := stockOf(t, db, s.ID); got != 0 {
			t.Fatalf("final stock %d, want 0", got)
		}
		if n := recordCount(t, db); n != 50 {
			t.Fatalf("%d records, want 50", n)
		}
	})
}

// Requests with one biz_no at once, each from its own replica (a Service
// of its own on the same database): one deducts, the others wait for it
// in the database and replay it. Then the same from one replica, where
// they meet in its batches first.
func TestDeductConcurrentSameBizNo(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		s := mustSku(t, svc, 100)
		const n = 20
		replicas := make([]*inventory.Service, n)
		for i := range replicas {
			replicas[i] = inventory.NewService(db)
		}
		var release func()
		if !b.Embedded() {
			// Hold the first deduction inside its statement, after its
			// decrement, until every other request is blocked behind its
			// record on the unique index: that is the wait the rule relies on.
			release = inventorytest.HoldDecrement(t, db, s.ID)
		}
		outs := make(chan []outcome, 1)
		go func() {
			outs <- concurrently(n, func(i int) outcome {
				r, err := replicas[i].Deduct(context.Background(), appA, in("SAME", s.ID, 7))
				return outcome{r, err}
			})
		}()
		if release != nil {
			inventorytest.WaitForLockWaiters(t, db, n) // the first on the hold, n-1 behind it
			release()
		}
		all := <-outs
		fresh := 0
		for i, o := range all {
			if o.err != nil {
				t.Fatalf("request %d: %v", i, o.err)
			}
			if !o.res.Replayed {
				fresh++
			}
			if o.res.Deduction != all[0].res.Deduction {
				t.Fatalf("request %d answered %+v, request 0 %+v", i, o.res.Deduction, all[0].res.Deduction)
			}
		}
		if fresh != 1 {
			t.Fatalf("%d answers were not replays, want exactly 1", fresh)
		}
		if all[0].res.RemainingStock != 93 || stockOf(t, db, s.ID) != 93 {
			t.Fatalf("stock %d (answered %d), want 93: one deduction", stockOf(t, db, s.ID), all[0].res.RemainingStock)
		}

		all = concurrently(n, func(int) outcome {
			r, err := svc.Deduct(context.Background(), appA, in("SAME-2", s.ID, 3))
			return outcome{r, err}
		})
		fresh = 0
		for i, o := range all {
			if o.err != nil || o.res.Deduction != all[0].res.Deduction {
				t.Fatalf("one replica, request %d: %+v, %v; request 0 %+v", i, o.res, o.err, all[0].res)
			}
			if !o.res.Replayed {
				fresh++
			}
		}
		if fresh != 1 || all[0].res.RemainingStock != 90 || stockOf(t, db, s.ID) != 90 {
			t.Fatalf("one replica: %d fresh answers, stock %d; want 1 and 90", fresh, stockOf(t, db, s.ID))
		}
	})
}

// Requests with one biz_no whose deduction fails unexpectedly every time
// (the fault is in the database): nothing is deducted, the biz_no ends up
// failed, and every request answers either the unexpected error (it ran
// the deduction) or "business failed" (it found the failure recorded).
func TestDeductConcurrentSameBizNoFails(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		s := mustSku(t, svc, 100)
		const n = 20
		inventorytest.FailDecrement(t, db, s.ID, "injected fault 9e41")
		outs := concurrently(n, func(int) outcome {
			r, err := svc.Deduct(context.Background(), appA, in("SAME-F", s.ID, 7))
			return outcome{r, err}
		})
		faults, failed := 0, 0
		for i, o := range outs {
			switch {
			case errors.Is(o.err, inventory.ErrBusinessFailed):
				failed++
			case o.err != nil && strings.Contains(o.err.Error(), "injected fault 9e41") && !errors.Is(o.err, errs.Unavailable):
				faults++
			default:
				t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
			}
		}
		if faults < 1 || faults+failed != n {
			t.Fatalf("%d faults, %d business failures; want at least 1 fault, %d in all", faults, failed, n)
		}
		if got := stockOf(t, db, s.ID); got != 100 {
			t.Fatalf("stock %d, want 100", got)
		}
		if rec := recordOf(t, db, "SAME-F"); rec == nil || rec.Status != inventory.StatusFailed {
			t.Fatalf("record = %+v", rec)
		}
	})
}

// Many buyers of one SKU at once, with mixed quantities and every biz_no
// sent twice concurrently: the stock never goes below zero, what was
// deducted is exactly the sum of the successes, each biz_no is decided
// once (one fresh answer, the other a replay with identical data, or two
// refusals), and later repeats replay the outcome: the stored success
// byte for byte, "business failed" after insufficient stock.
func TestDeductOversellManyBuyers(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		const initial, buyers = 57, 60
		s := mustSku(t, svc, initial)
		outs := concurrently(2*buyers, func(i int) outcome {
			k := i % buyers
			r, err := svc.Deduct(context.Background(), appA, in(fmt.Sprintf("OV-%02d", k), s.ID, int64(k%3+1)))
			return outcome{r, err}
		})
		var deducted int64
		seen := map[int64]bool{}
		for k := range buyers {
			a, c := outs[k], outs[k+buyers]
			switch {
			case a.err == nil && c.err == nil:
				if a.res.Deduction != c.res.Deduction || a.res.Replayed == c.res.Replayed {
					t.Fatalf("OV-%02d answered %+v and %+v", k, a.res, c.res)
				}
				if seen[a.res.RemainingStock] {
					t.Fatalf("two deductions left %d", a.res.RemainingStock)
				}
				seen[a.res.RemainingStock] = true
				deducted += a.res.Quantity
			case a.err != nil && c.err != nil:
				// One ran and found too little stock; the other either ran
				// too, waited for it, or found its failure recorded.
				for _, err := range []error{a.err, c.err} {
					if !errors.Is(err, inventory.ErrInsufficientStock) && !errors.Is(err, inventory.ErrBusinessFailed) {
						t.Fatalf("OV-%02d: %v", k, err)
					}
				}
				if errors.Is(a.err, inventory.ErrBusinessFailed) == errors.Is(c.err, inventory.ErrBusinessFailed) {
					t.Fatalf("OV-%02d: %v and %v, want one insufficient stock and one business failed", k, a.err, c.err)
				}
			default:
				t.Fatalf("OV-%02d answered %+v/%v and %+v/%v", k, a.res, a.err, c.res, c.err)
			}
		}
		final := stockOf(t, db, s.ID)
		if final < 0 || final != initial-deducted {
			t.Fatalf("final stock %d, %d deducted by successes from %d", final, deducted, initial)
		}
		if final >= 3 {
			t.Fatalf("final stock %d: a buyer of at most 3 was refused with stock left", final)
		}
		for k := range buyers {
			biz := fmt.Sprintf("OV-%02d", k)
			r, err := svc.Deduct(context.Background(), appA, in(biz, s.ID, int64(k%3+1)))
			first := outs[k]
			if first.err != nil {
				if !errors.Is(err, inventory.ErrBusinessFailed) {
					t.Fatalf("%s after a refusal: %+v, %v", biz, r, err)
				}
				continue
			}
			if err != nil || !r.Replayed || r.Deduction != first.res.Deduction {
				t.Fatalf("%s replay: %+v, %v; want %+v", biz, r, err, first.res.Deduction)
			}
			stored, _ := json.Marshal(first.res.Deduction)
			if rec := recordOf(t, db, biz); rec.ResponseResult != string(stored) {
				t.Fatalf("%s stored %s, want %s", biz, rec.ResponseResult, stored)
			}
		}
		if got := stockOf(t, db, s.ID); got != final {
			t.Fatalf("repeats changed the stock: %d, want %d", got, final)
		}
	})
}

// A record another process holds in status 0 is waited for, then answered.
func TestDeductWaitsForInFlightRecord(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		svc, db := newService(t, b)
		s := mustSku(t, svc, 10)
		params := fmt.Sprintf(`{"biz_no":"IF-1","quantity":2,"sku_id":%d}`, s.ID)
		// Written as another process would while its deduction runs.
		rec, err := db.IdempotencyRecord.Create().SetBizNo("IF-1").SetAppKey(appA).SetAPIPath(inventory.APIPath).
			SetRequestParams(params).SetStatus(inventory.StatusProcessing).Save(ctx)
		if err != nil {
			t.Fatal(err)
		}

		svc2 := inventory.NewService(db, inventory.WithInFlightWait(30*time.Second))
		waiting := make(chan struct{})
		var once sync.Once
		inventory.SetOnInFlight(svc2, func(string) { once.Do(func() { close(waiting) }) })
		done := make(chan outcome, 1)
		go func() {
			r, err := svc2.Deduct(ctx, appA, in("IF-1", s.ID, 2))
			done <- outcome{r, err}
		}()
		select {
		case <-waiting:
		case o := <-done:
			t.Fatalf("answered without waiting: %+v, %v", o.res, o.err)
		}
		// The other process finishes.
		stored := fmt.Sprintf(`{"biz_no":"IF-1","sku_id":%d,"quantity":2,"remaining_stock":8}`, s.ID)
		if err := db.IdempotencyRecord.UpdateOne(rec).SetStatus(inventory.StatusSucceeded).SetResponseResult(stored).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		o := <-done
		want := inventory.Deduction{BizNo: "IF-1", SkuID: s.ID, Quantity: 2, RemainingStock: 8}
		if o.err != nil || !o.res.Replayed || o.res.Deduction != want {
			t.Fatalf("after the record settled: %+v, %v", o.res, o.err)
		}
		if stockOf(t, db, s.ID) != 10 {
			t.Fatal("the waiting request deducted")
		}

		// Mismatches are answered at once, without waiting.
		if _, err := db.IdempotencyRecord.Create().SetBizNo("IF-2").SetAppKey(appA).SetAPIPath(inventory.APIPath).
			SetRequestParams(fmt.Sprintf(`{"biz_no":"IF-2","quantity":2,"sku_id":%d}`, s.ID)).SetStatus(0).Save(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := svc2.Deduct(ctx, appB, in("IF-2", s.ID, 2)); !errors.Is(err, inventory.ErrForbidden) {
			t.Fatalf("other app: %v", err)
		}
		if _, err := svc2.Deduct(ctx, appA, in("IF-2", s.ID, 3)); !errors.Is(err, inventory.ErrParamsMismatch) {
			t.Fatalf("other quantity: %v", err)
		}

		// A record that stays 0 past the bound: ErrInProgress, nothing done.
		svc3 := inventory.NewService(db, inventory.WithInFlightWait(100*time.Millisecond))
		var polls atomic.Int32
		inventory.SetOnInFlight(svc3, func(string) { polls.Add(1) })
		start := time.Now()
		if _, err := svc3.Deduct(ctx, appA, in("IF-2", s.ID, 2)); !errors.Is(err, inventory.ErrInProgress) {
			t.Fatalf("stuck record: %v", err)
		}
		if el := time.Since(start); el < 100*time.Millisecond || el > 10*time.Second || polls.Load() < 2 {
			t.Fatalf("gave up after %v and %d polls", el, polls.Load())
		}
		if r := recordOf(t, db, "IF-2"); r.Status != inventory.StatusProcessing {
			t.Fatalf("the stuck record was changed: %+v", r)
		}

		// A record whose writer rolls back (it disappears): the request
		// starts over and deducts.
		svc4 := inventory.NewService(db, inventory.WithInFlightWait(30*time.Second))
		var removed sync.Once
		inventory.SetOnInFlight(svc4, func(string) {
			removed.Do(func() {
				if _, err := db.IdempotencyRecord.Delete().Exec(ctx); err != nil {
					t.Error(err)
				}
			})
		})
		res, err := svc4.Deduct(ctx, appA, in("IF-2", s.ID, 2))
		if err != nil || res.Replayed || res.RemainingStock != 8 {
			t.Fatalf("after the record vanished: %+v, %v", res, err)
		}
		if r := recordOf(t, db, "IF-2"); r == nil || r.Status != inventory.StatusSucceeded {
			t.Fatalf("record = %+v", r)
		}
	})
}

// A database that does not answer is errs.Unavailable (503), not a plain
// internal error; validation still comes first.
func TestDeductDatabaseUnavailable(t *testing.T) {
	// Nothing listens on port 1 of the loopback interface.
	pool, err := sql.Open("pgx", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := &store.DB{Client: ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, pool))), SQL: pool, Dialect: dialect.Postgres}
	svc := inventory.NewService(db)
	_, err = svc.Deduct(context.Background(), appA, in("U-1", 1, 1))
	if !errors.Is(err, errs.Unavailable) {
		t.Fatalf("Deduct without a database = %v, want errs.Unavailable", err)
	}
	if _, err := svc.Deduct(context.Background(), appA, in("U-1", 1, 0)); errs.KindOf(err) != errs.Validation {
		t.Fatalf("invalid input without a database = %v, want a validation error", err)
	}
}
