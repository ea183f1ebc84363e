package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

var noopTracer = noop.NewTracerProvider().Tracer(ScopeName)

// Context is a W3C trace context in its header form, as the outbox keeps
// it: the traceparent and tracestate header values ("" when untraced).
type Context struct {
	Traceparent string
	Tracestate  string
}

// Capture returns the trace context of ctx's span in header form; the
// zero Context when ctx holds no valid span context (tracing off, or an
// untraced caller). It costs a check when there is nothing to capture.
func Capture(ctx context.Context) Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return Context{}
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	return Context{Traceparent: c["traceparent"], Tracestate: c["tracestate"]}
}

// SpanContext parses c back (marked remote); invalid when c is empty or
// malformed.
func (c Context) SpanContext() trace.SpanContext {
	if c.Traceparent == "" {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": c.Traceparent}
	if c.Tracestate != "" {
		carrier["tracestate"] = c.Tracestate
	}
	return trace.SpanContextFromContext(Propagator.Extract(context.Background(), carrier))
}
