package webhook_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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
	benchThroughput(b, 1, func(ctx context.Context, c *ent.Client, appID int) error {
		_, err := webhook.Fanout(ctx, c, webhook.Event{AppID: appID, Type: "bench.event", BizData: []byte(`{"k":"v"}`)})
		return err
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
				_, err := webhook.Fanout(ctx, tx.Client(), webhook.Event{AppID: appID, Type: "bench.event", BizData: []byte(`{}`)})
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

// Fan-out throughput: b.N events queued at once for 8 apps of 5 endpoints
// each (every delivery goes to the local sink), so 5×b.N deliveries; the
// figure to compare with BenchmarkDeliveryThroughput's drain/s (the goal:
// an event for 5 endpoints drains as fast as 5 separate deliveries).
func BenchmarkFanoutThroughput(b *testing.B) {
	benchThroughput(b, 5, func(ctx context.Context, c *ent.Client, appID int) error {
		_, err := webhook.Fanout(ctx, c, webhook.Event{AppID: appID, Type: "bench.event", BizData: []byte(`{"k":"v"}`)})
		return err
	})
}

// benchThroughput is the throughput benchmarks on both backends: 8 apps
// (so that the per-app cap does not bound it) of endpoints endpoints each,
// all at a local sink; b.N calls of enqueue, spread over the apps, in one
// transaction; then the wait until the sink has got endpoints×b.N
// deliveries. It reports deliveries/s from the start of the queueing,
// drain/s (the drain alone: the deliveries after the queueing transaction
// committed) and the CPU per 1 000 deliveries (cpuMeter).
func benchThroughput(b *testing.B, endpoints int, enqueue func(ctx context.Context, c *ent.Client, appID int) error) {
	benchBackends(b, func(b *testing.B, be testenv.Backend) {
		srv, n, _ := sink(b)
		e := newEnv(b, be, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		var apps []int
		for range 8 {
			id, _ := e.newApp(b, srv.URL)
			for j := 1; j < endpoints; j++ {
				url := fmt.Sprintf("%s/e%d", srv.URL, j)
				if _, _, err := e.svc.CreateEndpoint(ctx, id, webhook.EndpointInput{URL: &url}); err != nil {
					b.Fatal(err)
				}
			}
			apps = append(apps, id)
		}
		want := int64(endpoints * b.N)
		cpu := newCPUMeter(e, be)
		b.ResetTimer()
		cpu.start()
		start := time.Now()
		err := store.WithTx(ctx, e.db.Client, func(tx *ent.Tx) error {
			for i := range b.N {
				if err := enqueue(ctx, tx.Client(), apps[i%len(apps)]); err != nil {
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
		waitFor(b, 10*time.Minute, func() bool { return n.Load() >= want }, func() string { return "sink did not get every delivery" })
		elapsed := time.Since(start)
		b.StopTimer()
		cpu.report(b, want)
		b.ReportMetric(float64(want)/elapsed.Seconds(), "deliveries/s")
		b.ReportMetric(float64(want-first)/(elapsed-queued).Seconds(), "drain/s")
	})
}

// cpuMeter measures the CPU time this process and the database's server
// processes serving db (Postgres backends, read from /proc; 0 elsewhere)
// spend between start and stop: on a shared machine a steadier figure
// than wall-clock throughput.
type cpuMeter struct {
	db       *sql.DB
	self, pg time.Duration
}

func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ 100
}

func (m *cpuMeter) read() (self, pg time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if m.db == nil {
		return self, 0
	}
	rows, err := m.db.Query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return self, 0
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			pg += procCPU(pid)
		}
	}
	return self, pg
}

func (m *cpuMeter) start() { m.self, m.pg = m.read() }

// report adds the CPU ms per 1 000 deliveries of each side.
func (m *cpuMeter) report(b *testing.B, deliveries int64) {
	self, pg := m.read()
	b.ReportMetric(float64((self-m.self).Milliseconds())*1000/float64(deliveries), "go-cpu-ms/1k")
	if m.db != nil {
		b.ReportMetric(float64((pg-m.pg).Milliseconds())*1000/float64(deliveries), "pg-cpu-ms/1k")
	}
}

func newCPUMeter(e *env, be testenv.Backend) *cpuMeter {
	if be.Embedded() {
		return &cpuMeter{}
	}
	return &cpuMeter{db: e.db.SQL}
}
