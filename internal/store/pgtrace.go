package store

import (
	"context"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// slowAcquire is the least wait for a pooled connection that gets a
// pool.acquire span.
const slowAcquire = time.Millisecond

// pgTracer is otelpgx's tracer (a span per statement, batch, prepare and
// connect) with one change: the wait for a pooled connection gets a
// pool.acquire span only when it took slowAcquire or more. otelpgx makes
// one for every statement of the reads' pool, a quarter of a signed
// call's spans, nearly all of them measuring nothing; a pool that makes
// requests wait still shows, with its true start and end.
type pgTracer struct {
	*otelpgx.Tracer
	tracer trace.Tracer
}

func newPGTracer(tp trace.TracerProvider) pgx.QueryTracer {
	return &pgTracer{
		Tracer: otelpgx.NewTracer(otelpgx.WithTracerProvider(tp), otelpgx.WithTrimSQLInSpanName(),
			otelpgx.WithDisableSQLStatementInAttributes(), otelpgx.WithDisableConnectionDetailsInAttributes(),
			otelpgx.WithTracerAttributes(semconv.DBSystemNamePostgreSQL)),
		tracer: tp.Tracer("github.com/exaring/otelpgx"),
	}
}

type acquireStartKey struct{}

// TraceAcquireStart replaces otelpgx's: it notes the time only.
func (t *pgTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	return context.WithValue(ctx, acquireStartKey{}, time.Now())
}

// TraceAcquireEnd makes the span of a slow wait, backdated to its start.
func (t *pgTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	start, ok := ctx.Value(acquireStartKey{}).(time.Time)
	if !ok || (time.Since(start) < slowAcquire && data.Err == nil) {
		return
	}
	_, span := t.tracer.Start(ctx, "pool.acquire", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("db.system", "postgresql")))
	if data.Err != nil {
		span.RecordError(data.Err)
		span.SetStatus(codes.Error, "acquire a connection")
	}
	span.End()
}
