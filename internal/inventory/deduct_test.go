package inventory_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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

func TestDeductFaultAfterDecrement(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		ctx := context.Background()
		s := mustSku(t, svc, 10)
		boom := errors.New("injected fault")
		var seen atomic.Int64
		svc.SetFaults(inventory.Faults{AfterDecrement: func(biz string) error {
			// The decrement is visible inside the transaction only.
			seen.Store(stockOf(t, db, s.ID))
			return boom
		}})
		_, err := svc.Deduct(ctx, appA, in("F-1", s.ID, 4))
		if !errors.Is(err, boom) || errors.Is(err, errs.Unavailable) {
			t.Fatalf("Deduct = %v, want the injected fault", err)
		}
		if b.Embedded() {
			// SQLite readers see the last commit: the stock before the decrement.
			if seen.Load() != 10 {
				t.Fatalf("reader saw %d during the transaction", seen.Load())
			}
		}
		if got := stockOf(t, db, s.ID); got != 10 {
			t.Fatalf("stock %d after a fault, want 10 (rolled back)", got)
		}
		rec := recordOf(t, db, "F-1")
		if rec == nil || rec.Status != inventory.StatusFailed || rec.ResponseResult != "" {
			t.Fatalf("record = %+v, want status 2", rec)
		}
		svc.SetFaults(inventory.Faults{})
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
// the same biz_no retried later runs anew and succeeds.
func TestDeductFaultAtCommit(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		ctx := context.Background()
		s := mustSku(t, svc, 10)
		boom := errors.New("commit lost")
		svc.SetFaults(inventory.Faults{BeforeCommit: func(string) error { return boom }})
		for _, c := range []struct {
			biz string
			q   int64
		}{{"K-ok", 4}, {"K-short", 400}} {
			if _, err := svc.Deduct(ctx, appA, in(c.biz, s.ID, c.q)); !errors.Is(err, boom) || !errors.Is(err, errs.Unavailable) {
				t.Fatalf("%s: %v, want the injected fault as a dependency failure", c.biz, err)
			}
			if rec := recordOf(t, db, c.biz); rec != nil {
				t.Fatalf("%s: record = %+v, want none", c.biz, rec)
			}
		}
		if got := stockOf(t, db, s.ID); got != 10 {
			t.Fatalf("stock %d, want 10", got)
		}
		svc.SetFaults(inventory.Faults{})
		if res, err := svc.Deduct(ctx, appA, in("K-ok", s.ID, 4)); err != nil || res.Replayed || res.RemainingStock != 6 {
			t.Fatalf("retry: %+v, %v", res, err)
		}
	})
}

// TestDeductDependencyFailureRecordsNothing: the SKU row is locked by
// another transaction past the request's deadline. The deduction answers
// a dependency failure (503 to the partner) and leaves no record and no
// deduction behind; once the lock is gone, the same biz_no succeeds. A
// dependency failure reported from inside the business work is treated
// the same way.
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
		if rec := recordOf(t, db, "LOCKED-1"); rec != nil {
			t.Fatalf("record = %+v after a dependency failure, want none", rec)
		}
		res, err := svc.Deduct(context.Background(), appA, in("LOCKED-1", s.ID, 4))
		if err != nil || res.Replayed || res.RemainingStock != 6 || stockOf(t, db, s.ID) != 6 {
			t.Fatalf("retry after the lock: %+v, %v (stock %d)", res, err, stockOf(t, db, s.ID))
		}
		if rec := recordOf(t, db, "LOCKED-1"); rec == nil || rec.Status != inventory.StatusSucceeded {
			t.Fatalf("record = %+v, want status 1", rec)
		}

		svc.SetFaults(inventory.Faults{AfterDecrement: func(string) error {
			return fmt.Errorf("%w: connection lost", errs.Unavailable)
		}})
		if _, err := svc.Deduct(context.Background(), appA, in("DEP-1", s.ID, 1)); !errors.Is(err, errs.Unavailable) {
			t.Fatalf("dependency failure in the work: %v", err)
		}
		svc.SetFaults(inventory.Faults{})
		if rec := recordOf(t, db, "DEP-1"); rec != nil || stockOf(t, db, s.ID) != 6 {
			t.Fatalf("record %+v, stock %d after a dependency failure", rec, stockOf(t, db, s.ID))
		}
		if res, err := svc.Deduct(context.Background(), appA, in("DEP-1", s.ID, 1)); err != nil || res.RemainingStock != 5 {
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

func TestDeductConcurrentSameBizNo(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		s := mustSku(t, svc, 100)
		const n = 20
		var inFlight atomic.Int32
		if !b.Embedded() {
			// Hold the first transaction open, after its decrement, until
			// every other request is blocked behind its record on the unique
			// index: that is the wait the rule relies on.
			svc.SetFaults(inventory.Faults{AfterDecrement: func(string) error {
				inFlight.Add(1)
				waitForLockWaiters(t, db.SQL, n-1)
				return nil
			}})
		}
		outs := concurrently(n, func(int) outcome {
			r, err := svc.Deduct(context.Background(), appA, in("SAME", s.ID, 7))
			return outcome{r, err}
		})
		fresh := 0
		for i, o := range outs {
			if o.err != nil {
				t.Fatalf("request %d: %v", i, o.err)
			}
			if !o.res.Replayed {
				fresh++
			}
			if o.res.Deduction != outs[0].res.Deduction {
				t.Fatalf("request %d answered %+v, request 0 %+v", i, o.res.Deduction, outs[0].res.Deduction)
			}
		}
		if fresh != 1 {
			t.Fatalf("%d answers were not replays, want exactly 1", fresh)
		}
		if outs[0].res.RemainingStock != 93 || stockOf(t, db, s.ID) != 93 {
			t.Fatalf("stock %d (answered %d), want 93: one deduction", stockOf(t, db, s.ID), outs[0].res.RemainingStock)
		}
		if !b.Embedded() && inFlight.Load() != 1 {
			t.Fatalf("the business work ran %d times", inFlight.Load())
		}
	})
}

// Requests waiting for a first request that fails unexpectedly answer as
// repeats of a failure, and nothing is deducted.
func TestDeductConcurrentSameBizNoFirstFails(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		s := mustSku(t, svc, 100)
		const n = 20
		boom := errors.New("injected fault")
		var calls atomic.Int32
		svc.SetFaults(inventory.Faults{AfterDecrement: func(string) error {
			if calls.Add(1) > 1 {
				t.Error("the business work ran twice for one biz_no")
			}
			if !b.Embedded() {
				waitForLockWaiters(t, db.SQL, n-1)
			}
			return boom
		}})
		outs := concurrently(n, func(int) outcome {
			r, err := svc.Deduct(context.Background(), appA, in("SAME-F", s.ID, 7))
			return outcome{r, err}
		})
		faults, failed := 0, 0
		for i, o := range outs {
			switch {
			case errors.Is(o.err, boom):
				faults++
			case errors.Is(o.err, inventory.ErrBusinessFailed):
				failed++
			default:
				t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
			}
		}
		if faults != 1 || failed != n-1 {
			t.Fatalf("%d faults, %d business failures; want 1 and %d", faults, failed, n-1)
		}
		if got := stockOf(t, db, s.ID); got != 100 {
			t.Fatalf("stock %d, want 100", got)
		}
		if rec := recordOf(t, db, "SAME-F"); rec.Status != inventory.StatusFailed {
			t.Fatalf("record = %+v", rec)
		}
	})
}

// waitForLockWaiters waits until n other sessions of this Postgres
// database are blocked on a lock.
func waitForLockWaiters(t *testing.T, db *sql.DB, n int) {
	eventually(t, 20*time.Second, fmt.Sprintf("%d sessions waiting on a lock", n), func() bool {
		var got int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got)
		if err != nil {
			t.Errorf("pg_stat_activity: %v", err)
			return true
		}
		return got >= n
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
