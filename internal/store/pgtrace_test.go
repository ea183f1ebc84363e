package store

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gatehouse/internal/telemetry/telemetrytest"
	"gatehouse/internal/testenv"
)

// TestPoolAcquireSpanOnlyWhenSlow: under a request's span, a statement
// of the reads' pool has its span, a connection handed out at once makes
// no pool.acquire span, and a wait for a busy pool makes one, as long as
// the wait and under the request.
func TestPoolAcquireSpanOnlyWhenSlow(t *testing.T) {
	rec := telemetrytest.New(t)
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = newPGTracer(rec.Provider)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var one int
	// The pool's one connection opened first (a connect is a slow acquire).
	if err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	ctx, req := rec.Provider.Tracer("test").Start(context.Background(), "request")
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, "of the statement", func(s tracetest.SpanStub) bool { return s.Name == "query SELECT" && rec.Under(s, req.SpanContext()) })
	for _, s := range rec.Spans() {
		if s.Name == "pool.acquire" {
			t.Fatalf("a pool.acquire span for a free connection (%v)", s.EndTime.Sub(s.StartTime))
		}
	}

	held, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(30*time.Millisecond, held.Release)
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Release()
	req.End()
	wait := rec.Wait(t, "pool.acquire of the wait", func(s tracetest.SpanStub) bool { return s.Name == "pool.acquire" })
	if d := wait.EndTime.Sub(wait.StartTime); d < 25*time.Millisecond || !rec.Under(wait, req.SpanContext()) {
		t.Errorf("pool.acquire span of %v under %s, want the 30 ms wait under the request", d, wait.Parent.SpanID())
	}
}
