package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// ChildOnly is the tracer provider the database and Redis instrumentation
// get: it makes a span only under a span already in the context (a
// request's, a webhook attempt's), never a root span for background work
// (the dispatcher's polling, retention, counters' flushes), which would
// flood the traces with one-span traces nobody asked for. Nil when off.
func (t *Tracing) ChildOnly() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return childOnlyProvider{t.provider}
}

type childOnlyProvider struct{ trace.TracerProvider }

func (p childOnlyProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childOnlyTracer{p.TracerProvider.Tracer(name, opts...)}
}

type childOnlyTracer struct{ trace.Tracer }

// Start starts a span when ctx holds one; else it returns ctx unchanged
// and a no-op span (ending it, or reading ctx's span back, ends nothing).
func (t childOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.Tracer.Start(ctx, name, opts...)
}
