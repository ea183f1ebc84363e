package telemetry

import (
	"context"
	"crypto/rand"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The trust boundary of traces. Inside it (gatehouse, its admin callers,
// its database and Redis) one trace follows a business transaction from
// the request to its webhooks. Outside it are partners calling the public
// listener and the receivers and providers gatehouse calls: a partner
// must not choose the trace (and so the sampling, and where its spans
// land) of gatehouse's work, and a receiver must not learn gatehouse's
// trace ids or what an admin put in tracestate. See docs/operations.md.

// Remote returns the span context a caller's traceparent (and tracestate)
// header names, marked remote; invalid when there is none or it is
// malformed.
func Remote(h http.Header) trace.SpanContext {
	return trace.SpanContextFromContext(Propagator.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// InjectExternal writes into h, a request to a service outside the
// boundary, a traceparent of a fresh trace (new trace and span ids; the
// sampled flag of ctx's span, so a receiver that traces keeps what was
// kept here) and removes any tracestate: none of ctx's ids or state
// leaves. It returns the context it wrote (invalid, and nothing written,
// when ctx holds no valid span context: tracing off, or untraced) so that
// the caller's span can record it (AttrExternalTraceID) and a receiver's
// trace can be found from gatehouse's.
func InjectExternal(ctx context.Context, h http.Header) trace.SpanContext {
	h.Del("tracestate")
	inner := trace.SpanContextFromContext(ctx)
	if !inner.IsValid() {
		return trace.SpanContext{}
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:]) // never fails (crypto/rand)
	_, _ = rand.Read(sid[:])
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: inner.TraceFlags() & trace.FlagsSampled})
	Propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.HeaderCarrier(h))
	return sc
}

// AttrExternalTraceID is the attribute of a client span naming the trace
// id its request carried out (InjectExternal): the receiver's trace.
const AttrExternalTraceID = "gatehouse.external.trace_id"
