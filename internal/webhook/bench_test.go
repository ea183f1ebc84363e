package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// benchBackends runs fn on SQLite and on Postgres.
func benchBackends(b *testing.B, fn func(b *testing.B, be testenv.Backend)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, testenv.Backend{Name: "sqlite"}) })
	b.Run("postgres", func(b *testing.B) {
		fn(b, testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(b)})
	})
}

// sink answers 204 and reports each arrival.
func sink(b *testing.B) (*httptest.Server, *atomic.Int64, chan time.Time) {
	var n atomic.Int64
	arrivals := make(chan time.Time, 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		select {
		case arrivals <- time.Now():
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	return srv, &n, arrivals
}

// Throughput: b.N deliveries queued at once for 8 apps (so that the
// per-app cap does not bound it), delivered to a local sink.
func BenchmarkDeliveryThroughput(b *testing.B) {
	benchBackends(b, func(b *testing.B, be testenv.Backend) {
		srv, n, _ := sink(b)
		e := newEnv(b, be, webhook.Options{AllowPrivate: true})
		var apps []int
		for range 8 {
			id, _ := e.newApp(b, srv.URL)
			apps = append(apps, id)
		}
		ctx := context.Background()
		b.ResetTimer()
		start := time.Now()
		err := store.WithTx(ctx, e.db.Client, func(tx *ent.Tx) error {
			for i := range b.N {
				if _, err := webhook.Enqueue(ctx, tx.Client(), apps[i%len(apps)], "bench.event", []byte(`{"k":"v"}`)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		queued := time.Since(start)
		first := n.Load()
		waitFor(b, 10*time.Minute, func() bool { return n.Load() >= int64(b.N) }, func() string { return "sink did not get every delivery" })
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
		// The drain alone: deliveries after the queueing transaction committed.
		b.ReportMetric(float64(int64(b.N)-first)/(elapsed-queued).Seconds(), "drain/s")
	})
}

// Latency: one event at a time, from the commit of its transaction to its
// first attempt arriving at the sink.
func BenchmarkFirstAttemptLatency(b *testing.B) {
	benchBackends(b, func(b *testing.B, be testenv.Backend) {
		srv, _, arrivals := sink(b)
		// An hour-long poll interval: only the in-process wake-up counts.
		e := newEnv(b, be, webhook.Options{AllowPrivate: true, PollInterval: time.Hour})
		appID, _ := e.newApp(b, srv.URL)
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			var committed time.Time
			err := store.WithTx(ctx, e.db.Client, func(tx *ent.Tx) error {
				_, err := webhook.Enqueue(ctx, tx.Client(), appID, "bench.event", []byte(`{}`))
				committed = time.Now()
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			select {
			case at := <-arrivals:
				lat = append(lat, at.Sub(committed))
			case <-time.After(10 * time.Second):
				b.Fatal("no attempt within 10 s")
			}
		}
		b.StopTimer()
		slices.Sort(lat)
		pct := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
	})
}
