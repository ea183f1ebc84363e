package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent"
	"gatehouse/internal/errs"
	"gatehouse/internal/inventory"
	"gatehouse/internal/inventory/inventorytest"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// batchSizes records the size of every batch svc runs.
type batchSizes struct {
	mu    sync.Mutex
	sizes []int
}

// watchBatches records the batches of svc; each of also is called with
// the size of every batch before it runs.
func watchBatches(svc *inventory.Service, also ...func(size int)) *batchSizes {
	b := &batchSizes{}
	inventory.SetOnBatch(svc, func(n int) {
		b.mu.Lock()
		b.sizes = append(b.sizes, n)
		b.mu.Unlock()
		for _, fn := range also {
			fn(n)
		}
	})
	return b
}

func (b *batchSizes) get() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sizes)
}

// waitFor polls cond (up to 20 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not a wait for work
	}
}

// skuBeside creates a SKU whose deductions share batches with those of
// SKU near: any SKU on SQLite (one combiner); on Postgres one with an id
// in near's combiner, inserted with that id.
func skuBeside(t *testing.T, svc *inventory.Service, db *store.DB, near int, stock int64) *ent.Sku {
	t.Helper()
	if db.Dialect != dialect.Postgres {
		return mustSku(t, svc, stock)
	}
	for id := near + 1; id < near+1<<20; id++ {
		if !inventory.SameCombiner(svc, near, id) {
			continue
		}
		res, err := db.SQL.ExecContext(context.Background(),
			`INSERT INTO skus (id, name, stock, update_time) VALUES ($1, 'beside', $2, now()) ON CONFLICT (id) DO NOTHING`, id, stock)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			s, err := svc.Sku(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	t.Fatal("no SKU beside", near)
	return nil
}

// lockSku holds SKU id's row (Postgres) or the process's write turn
// (SQLite: one writer; the deductions of this process wait for the turn
// before they reach the database) until the returned function is called.
func lockSku(t *testing.T, b testenv.Backend, db *store.DB, id int) (unlock func()) {
	t.Helper()
	var once sync.Once
	if b.Embedded() {
		release, err := db.WriteTurn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		unlock = func() { once.Do(release) }
		t.Cleanup(unlock)
		return unlock
	}
	locker, err := db.SQL.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var stock int64
	if err := locker.QueryRowContext(context.Background(), "SELECT stock FROM skus WHERE id = $1 FOR UPDATE", id).Scan(&stock); err != nil {
		t.Fatal(err)
	}
	unlock = func() { once.Do(func() { _ = locker.Rollback() }) }
	t.Cleanup(unlock)
	return unlock
}

// holdFirst starts a deduction of biz_no biz on SKU sku (app A) and holds
// it in the database (lockSku) once it has started, so that the next
// deductions of its combiner queue; release lets it finish and returns
// its outcome.
func holdFirst(t *testing.T, b testenv.Backend, db *store.DB, svc *inventory.Service, sizes *batchSizes, sku int, biz string) (release func() outcome) {
	t.Helper()
	before := len(sizes.get())
	unlock := lockSku(t, b, db, sku)
	first := make(chan outcome, 1)
	go func() {
		r, err := svc.Deduct(context.Background(), appA, in(biz, sku, 1))
		first <- outcome{r, err}
	}()
	waitFor(t, "the first deduction to start", func() bool { return len(sizes.get()) > before })
	return func() outcome {
		unlock()
		return <-first
	}
}

// On Postgres deductions of different SKUs share batches: SKUs are spread
// by id over two groups per CPU (with a group per SKU, concurrent
// deductions of different SKUs never shared a commit), and ids that far
// apart meet in one group while closer ones run in parallel. SQLite has
// one group.
func TestDeductGroupsSpanSkus(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, _ := newService(t, b)
		groups := 2 * runtime.GOMAXPROCS(0)
		if b.Embedded() {
			groups = 1
		}
		id := mustSku(t, svc, 1).ID
		for k := 1; k < groups; k++ {
			if inventory.SameCombiner(svc, id, id+k) {
				t.Fatalf("SKUs %d and %d share a group, want %d groups", id, id+k, groups)
			}
		}
		if !inventory.SameCombiner(svc, id, id+groups) {
			t.Fatalf("SKUs %d and %d are in different groups, want %d groups", id, id+groups, groups)
		}
	})
}

// Deductions that arrive while one is held in the database queue and then
// run as one batch, each with the answer it would get alone: successes
// until the stock runs out (never below zero), insufficient stock after,
// an unknown SKU, another SKU's deduction, and repeats of an earlier
// biz_no (replay, other app, other parameters) — a biz_no appears once
// per batch, so its repeats run in the batches after.
func TestDeductBatches(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		sizes := watchBatches(svc)
		ctx := context.Background()
		a := mustSku(t, svc, 10)
		other := skuBeside(t, svc, db, a.ID, 100)
		unknown := a.ID
		for unknown == a.ID || unknown == other.ID || !inventory.SameCombiner(svc, a.ID, unknown) {
			unknown++
		}
		if r, err := svc.Deduct(ctx, appA, in("BT-old", a.ID, 1)); err != nil || r.RemainingStock != 9 {
			t.Fatalf("first deduction: %+v, %v", r, err)
		}
		before := len(sizes.get())
		release := holdFirst(t, b, db, svc, sizes, a.ID, "BT-first")

		type req struct {
			app string
			in  inventory.DeductInput
		}
		var reqs []req
		for i := range 12 {
			reqs = append(reqs, req{appA, in(fmt.Sprintf("BT-a-%02d", i), a.ID, 1)})
		}
		reqs = append(reqs,
			req{appA, in("BT-other", other.ID, 5)},
			req{appA, in("BT-unknown", unknown, 1)},
			req{appA, in("BT-old", a.ID, 1)},
			req{appB, in("BT-old", a.ID, 1)},
			req{appA, in("BT-old", a.ID, 2)},
		)
		outs := make(chan []outcome, 1)
		go func() {
			outs <- concurrently(len(reqs), func(i int) outcome {
				r, err := svc.Deduct(ctx, reqs[i].app, reqs[i].in)
				return outcome{r, err}
			})
		}()
		waitFor(t, "every deduction to queue", func() bool { return inventory.Queued(svc) == len(reqs) })
		if f := release(); f.err != nil || f.res.RemainingStock != 8 {
			t.Fatalf("held deduction: %+v, %v", f.res, f.err)
		}
		all := <-outs
		remaining := map[int64]bool{}
		short := 0
		for i, o := range all[:12] {
			switch {
			case o.err == nil && !o.res.Replayed && o.res.Quantity == 1:
				if remaining[o.res.RemainingStock] || o.res.RemainingStock < 0 {
					t.Fatalf("BT-a-%02d left %d, answered twice or below zero", i, o.res.RemainingStock)
				}
				remaining[o.res.RemainingStock] = true
			case errors.Is(o.err, inventory.ErrInsufficientStock):
				short++
			default:
				t.Fatalf("BT-a-%02d: %+v, %v", i, o.res, o.err)
			}
		}
		if len(remaining) != 8 || short != 4 || stockOf(t, db, a.ID) != 0 {
			t.Fatalf("%d successes, %d short, stock %d; want 8, 4, 0", len(remaining), short, stockOf(t, db, a.ID))
		}
		if o := all[12]; o.err != nil || o.res.RemainingStock != 95 || stockOf(t, db, other.ID) != 95 {
			t.Fatalf("other SKU: %+v, %v", o.res, o.err)
		}
		if o := all[13]; !errors.Is(o.err, inventory.ErrNotFound) {
			t.Fatalf("unknown SKU: %+v, %v", o.res, o.err)
		}
		if o := all[14]; o.err != nil || !o.res.Replayed || o.res.RemainingStock != 9 {
			t.Fatalf("replay: %+v, %v", o.res, o.err)
		}
		if o := all[15]; !errors.Is(o.err, inventory.ErrForbidden) {
			t.Fatalf("other app's repeat: %+v, %v", o.res, o.err)
		}
		if o := all[16]; !errors.Is(o.err, inventory.ErrParamsMismatch) {
			t.Fatalf("repeat with another quantity: %+v, %v", o.res, o.err)
		}
		if got := sizes.get()[before+1:]; slices.Max(got) < 10 {
			t.Fatalf("batch sizes after the held deduction: %v, want one of at least 10", got)
		}

		// Every outcome was recorded as it was answered, and replays.
		for i, o := range all[:12] {
			biz := fmt.Sprintf("BT-a-%02d", i)
			rec := recordOf(t, db, biz)
			again, err := svc.Deduct(ctx, appA, in(biz, a.ID, 1))
			if o.err != nil {
				if rec == nil || rec.Status != inventory.StatusFailed || !errors.Is(err, inventory.ErrBusinessFailed) {
					t.Fatalf("%s: record %+v, repeat %v", biz, rec, err)
				}
				continue
			}
			if rec == nil || rec.Status != inventory.StatusSucceeded || err != nil || !again.Replayed || again.Deduction != o.res.Deduction {
				t.Fatalf("%s: record %+v, repeat %+v, %v; want %+v", biz, rec, again, err, o.res)
			}
		}
		if rec := recordOf(t, db, "BT-unknown"); rec == nil || rec.Status != inventory.StatusFailed {
			t.Fatalf("unknown SKU's record: %+v", rec)
		}
	})
}

// A deduction whose statement fails unexpectedly inside a batch (the
// fault is on its SKU's row) does not take the batch with it: the batch
// rolls back whole and each deduction runs again alone, where the faulty
// one is answered with its error and recorded failed, the others succeed.
func TestDeductBatchFaultRunsAlone(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		sizes := watchBatches(svc)
		ctx := context.Background()
		good := mustSku(t, svc, 10)
		bad := skuBeside(t, svc, db, good.ID, 10)
		inventorytest.FailDecrement(t, db, bad.ID, "injected fault 77c1")

		release := holdFirst(t, b, db, svc, sizes, good.ID, "FB-first")
		bizs := []string{"FB-1", "FB-bad", "FB-2", "FB-3"}
		outs := make(chan []outcome, 1)
		go func() {
			outs <- concurrently(len(bizs), func(i int) outcome {
				sku := good.ID
				if bizs[i] == "FB-bad" {
					sku = bad.ID
				}
				r, err := svc.Deduct(ctx, appA, in(bizs[i], sku, 1))
				return outcome{r, err}
			})
		}()
		waitFor(t, "every deduction to queue", func() bool { return inventory.Queued(svc) == len(bizs) })
		if f := release(); f.err != nil {
			t.Fatal(f.err)
		}
		all := <-outs
		if got := sizes.get(); len(got) < 2 || got[1] != len(bizs) {
			t.Fatalf("batch sizes %v, want the held one then one of %d", got, len(bizs))
		}
		for i, o := range all {
			if bizs[i] == "FB-bad" {
				if o.err == nil || !strings.Contains(o.err.Error(), "injected fault 77c1") || errors.Is(o.err, errs.Unavailable) {
					t.Fatalf("faulty deduction: %+v, %v", o.res, o.err)
				}
				if rec := recordOf(t, db, "FB-bad"); rec == nil || rec.Status != inventory.StatusFailed {
					t.Fatalf("faulty deduction's record: %+v", rec)
				}
				continue
			}
			if o.err != nil || recordOf(t, db, bizs[i]).Status != inventory.StatusSucceeded {
				t.Fatalf("%s: %+v, %v", bizs[i], o.res, o.err)
			}
		}
		if stockOf(t, db, good.ID) != 6 || stockOf(t, db, bad.ID) != 10 {
			t.Fatalf("stock %d and %d, want 6 and 10", stockOf(t, db, good.ID), stockOf(t, db, bad.ID))
		}
	})
}

// Deadlines in a batch: a deduction whose caller gives up while it waits
// for a batch leaves the queue (503, nothing recorded); a batch that
// cannot finish by the earliest deadline of its deductions (the row stays
// locked) answers 503 to all of them and leaves nothing, not even once
// the lock is gone; the same biz_nos then succeed.
func TestDeductBatchDeadline(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		sizes := watchBatches(svc)
		s := mustSku(t, svc, 10)
		unlock := lockSku(t, b, db, s.ID)

		deduct := func(biz string, d time.Duration) outcome {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			r, err := svc.Deduct(ctx, appA, in(biz, s.ID, 1))
			return outcome{r, err}
		}
		first := make(chan outcome, 1)
		go func() { first <- deduct("DL-first", 600*time.Millisecond) }()
		waitFor(t, "the first deduction to start", func() bool { return len(sizes.get()) == 1 })
		quitter := make(chan outcome, 1)
		go func() { quitter <- deduct("DL-quit", 100*time.Millisecond) }()
		batch := make(chan []outcome, 1)
		go func() {
			batch <- concurrently(2, func(i int) outcome {
				return deduct(fmt.Sprintf("DL-%d", i), []time.Duration{time.Second, 30 * time.Second}[i])
			})
		}()
		for _, o := range append([]outcome{<-quitter, <-first}, <-batch...) {
			if !errors.Is(o.err, errs.Unavailable) {
				t.Fatalf("deduction past its deadline: %+v, %v; want a dependency failure", o.res, o.err)
			}
		}
		if got := sizes.get(); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("batch sizes %v, want [1 2]: the quitter never ran", got)
		}
		unlock()
		if !b.Embedded() {
			inventorytest.WaitForIdle(t, db)
		}
		for _, biz := range []string{"DL-first", "DL-quit", "DL-0", "DL-1"} {
			if rec := recordOf(t, db, biz); rec != nil {
				t.Fatalf("%s: record %+v after a dependency failure", biz, rec)
			}
		}
		if got := stockOf(t, db, s.ID); got != 10 {
			t.Fatalf("stock %d, want 10", got)
		}
		for i, biz := range []string{"DL-first", "DL-quit", "DL-0", "DL-1"} {
			if o := deduct(biz, 5*time.Second); o.err != nil || o.res.RemainingStock != int64(9-i) {
				t.Fatalf("%s retried: %+v, %v", biz, o.res, o.err)
			}
		}
	})
}

// A caller that hangs up after its deduction joined a batch does not undo
// it, nor the others': the batch runs to its end (its context ignores the
// cancellation), the deduction is committed and recorded, and the same
// biz_no sent again replays it.
func TestDeductBatchHangUpAfterJoining(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		quitCtx, hangUp := context.WithCancel(context.Background())
		defer hangUp()
		sizes := watchBatches(svc, func(n int) {
			if n > 1 {
				hangUp() // after the batch was formed, before it runs
			}
		})
		s := mustSku(t, svc, 10)
		release := holdFirst(t, b, db, svc, sizes, s.ID, "HU-first")

		bizs := []string{"HU-1", "HU-quit", "HU-2"}
		outs := make(chan []outcome, 1)
		go func() {
			outs <- concurrently(len(bizs), func(i int) outcome {
				ctx := context.Background()
				if bizs[i] == "HU-quit" {
					ctx = quitCtx
				}
				r, err := svc.Deduct(ctx, appA, in(bizs[i], s.ID, 1))
				return outcome{r, err}
			})
		}()
		waitFor(t, "every deduction to queue", func() bool { return inventory.Queued(svc) == len(bizs) })
		if f := release(); f.err != nil {
			t.Fatal(f.err)
		}
		all := <-outs
		if got := sizes.get(); !slices.Equal(got, []int{1, len(bizs)}) {
			t.Fatalf("batch sizes %v, want [1 %d]", got, len(bizs))
		}
		if quitCtx.Err() == nil {
			t.Fatal("the caller never hung up")
		}
		for i, o := range all {
			if o.err != nil {
				t.Fatalf("%s: %v; a hang-up inside a batch must not fail it", bizs[i], o.err)
			}
			if rec := recordOf(t, db, bizs[i]); rec == nil || rec.Status != inventory.StatusSucceeded {
				t.Fatalf("%s: record %+v", bizs[i], rec)
			}
		}
		if got := stockOf(t, db, s.ID); got != 6 {
			t.Fatalf("stock %d, want 6", got)
		}
		quit := all[slices.Index(bizs, "HU-quit")]
		again, err := svc.Deduct(context.Background(), appA, in("HU-quit", s.ID, 1))
		if err != nil || !again.Replayed || again.Deduction != quit.res.Deduction {
			t.Fatalf("HU-quit sent again: %+v, %v; want a replay of %+v", again, err, quit.res)
		}
	})
}

// Replicas (services on one database) deduct at once from two SKUs that
// share a batch group. First distinct biz_nos arriving in no particular
// order, so that concurrent batches of different replicas hold the two
// SKUs in every order (they lock them in SKU id order: none waits for
// another in a cycle, which would surface as a 503); then biz_nos that
// two replicas receive at once (a partner retrying on another replica).
// Every request is answered, each biz_no deducts once and replays to its
// repeat, and each SKU's stock falls by exactly its successes.
func TestDeductBatchesAcrossReplicas(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		replicas := []*inventory.Service{svc, inventory.NewService(db), inventory.NewService(db)}
		var mu sync.Mutex
		largest := 0
		for _, r := range replicas {
			watchBatches(r, func(n int) {
				mu.Lock()
				largest = max(largest, n)
				mu.Unlock()
			})
		}
		const stock, distinct, twice = 1000, 180, 60
		a := mustSku(t, svc, stock)
		c := skuBeside(t, svc, db, a.ID, stock)
		type req struct {
			replica int
			in      inventory.DeductInput
		}
		var first, second []req
		for i := range distinct + twice {
			sku := a.ID
			if i%2 == 1 {
				sku = c.ID
			}
			d := in(fmt.Sprintf("XR-%03d", i), sku, int64(1+i%3))
			if i < distinct {
				first = append(first, req{i % 3, d})
				continue
			}
			second = append(second, req{i % 3, d}, req{(i + 1) % 3, d})
		}
		rand.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
		var reqs []req
		var outs []outcome
		for _, round := range [][]req{first, second} {
			reqs = append(reqs, round...)
			outs = append(outs, concurrently(len(round), func(i int) outcome {
				r, err := replicas[round[i].replica].Deduct(context.Background(), appA, round[i].in)
				return outcome{r, err}
			})...)
		}

		answers := map[string][]inventory.Result{}
		spent := map[int]int64{}
		left := map[int]map[int64]bool{a.ID: {}, c.ID: {}}
		for i, o := range outs {
			d := reqs[i].in
			if o.err != nil {
				t.Fatalf("%s on replica %d: %v", d.BizNo, reqs[i].replica, o.err)
			}
			answers[d.BizNo] = append(answers[d.BizNo], o.res)
			if !o.res.Replayed {
				spent[d.SkuID] += d.Quantity
				if left[d.SkuID][o.res.RemainingStock] {
					t.Fatalf("%s: remaining stock %d answered twice", d.BizNo, o.res.RemainingStock)
				}
				left[d.SkuID][o.res.RemainingStock] = true
			}
		}
		for biz, rs := range answers {
			fresh := 0
			for _, r := range rs {
				if !r.Replayed {
					fresh++
				}
				if r.Deduction != rs[0].Deduction {
					t.Fatalf("%s answered %+v and %+v", biz, rs[0].Deduction, r.Deduction)
				}
			}
			if fresh != 1 {
				t.Fatalf("%s deducted %d times", biz, fresh)
			}
		}
		for _, s := range []int{a.ID, c.ID} {
			if got := stockOf(t, db, s); got != stock-spent[s] {
				t.Fatalf("SKU %d: stock %d, want %d", s, got, stock-spent[s])
			}
		}
		if n := recordCount(t, db); n != distinct+twice {
			t.Fatalf("%d records, want %d", n, distinct+twice)
		}
		t.Logf("largest batch %d", largest)
		if largest < 2 {
			t.Fatal("no batch of several deductions formed: the test did not exercise batches")
		}
	})
}
