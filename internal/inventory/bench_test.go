package inventory_test

import (
	"context"
	"fmt"
	"gatehouse/internal/store/storetest"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/inventory"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// benchParallelism × GOMAXPROCS goroutines send deductions at once.
const benchParallelism = 4

// BenchmarkDeduct measures idempotent deductions per second:
//
//   - hot: every deduction hits one SKU (its row lock serialises them).
//     In the same run, the same number of plain single-row
//     "UPDATE skus SET stock = stock - 1 WHERE id = ? AND stock >= 1"
//     statements are sent with the same concurrency, and the ratio
//     deduct/plain is reported: the price of exactly-once (the record and
//     its outcome, committed with the decrement) over the bare conditional
//     update, less what batches save (one commit for the deductions that
//     queue together).
//   - spread: deductions over 1000 SKUs.
//
// SQLite runs first; the Postgres half is skipped only when Postgres is
// absent (and fails instead in CI, like the tests).
func BenchmarkDeduct(b *testing.B) {
	sqlite := storetest.Open(b, testenv.Backend{Name: "sqlite"})
	b.Run("sqlite", func(b *testing.B) { benchBackend(b, sqlite) })
	pg := storetest.Open(b, testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(b)})
	b.Run("postgres", func(b *testing.B) { benchBackend(b, pg) })
}

func benchBackend(b *testing.B, db *store.DB) {
	svc := inventory.NewService(db)
	b.Run("hot", func(b *testing.B) {
		s := benchSku(b, svc)
		prefix := "hot-" + testenv.RandomSuffix() + "-"
		var seq atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				benchDeduct(b, svc, prefix+strconv.FormatInt(seq.Add(1), 10), s)
			}
		})
		b.StopTimer()
		deductRate := float64(b.N) / b.Elapsed().Seconds()
		plainRate := plainUpdates(b, db, s, b.N)
		b.ReportMetric(deductRate, "deductions/s")
		b.ReportMetric(plainRate, "plain_updates/s")
		b.ReportMetric(deductRate/plainRate, "deduct/plain")
	})
	skus := make([]int, 1000)
	for i := range skus {
		skus[i] = benchSku(b, svc)
	}
	b.Run("spread", func(b *testing.B) {
		prefix := "spread-" + testenv.RandomSuffix() + "-"
		var seq atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				benchDeduct(b, svc, prefix+strconv.FormatInt(seq.Add(1), 10), skus[rand.IntN(len(skus))])
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deductions/s")
	})
}

func benchSku(b *testing.B, svc *inventory.Service) int {
	s, err := svc.CreateSku(context.Background(), "bench", inventory.MaxStock)
	if err != nil {
		b.Fatal(err)
	}
	return s.ID
}

func benchDeduct(b *testing.B, svc *inventory.Service, bizNo string, sku int) {
	res, err := svc.Deduct(context.Background(), "bench-app", inventory.DeductInput{BizNo: bizNo, SkuID: sku, Quantity: 1})
	if err != nil || res.Replayed {
		b.Errorf("deduct %s: %+v, %v", bizNo, res, err)
	}
}

// plainUpdates sends n conditional single-row updates of sku with the
// concurrency of RunParallel and returns how many completed per second.
func plainUpdates(b *testing.B, db *store.DB, sku, n int) float64 {
	q := "UPDATE skus SET stock = stock - 1 WHERE id = ? AND stock >= 1"
	if db.Dialect == "postgres" {
		q = "UPDATE skus SET stock = stock - 1 WHERE id = $1 AND stock >= 1"
	}
	workers := benchParallelism * runtime.GOMAXPROCS(0)
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				r, err := db.SQL.Exec(q, sku)
				if err != nil {
					b.Error(err)
					return
				}
				if k, _ := r.RowsAffected(); k != 1 {
					b.Error(fmt.Errorf("plain update changed %d rows", k))
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}
