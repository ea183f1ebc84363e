package dispatch

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/telemetry"
)

// SpanAttempt is the name of the span of one delivery attempt.
const SpanAttempt = "webhook attempt"

// traceAttempt starts the span of one attempt of j, a child of the trace
// context its event was queued in (so it shows under the payOrder, say,
// that caused it), or a new trace when there is none. Off: ctx and a
// no-op span, nothing allocated.
func (s *Dispatcher) traceAttempt(ctx context.Context, j job) (context.Context, trace.Span) {
	if !s.opt.Tracing.On() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	parent := context.Background()
	if sc := j.Trace.SpanContext(); sc.IsValid() {
		parent = trace.ContextWithRemoteSpanContext(parent, sc)
	}
	_, span := s.opt.Tracing.Tracer().Start(parent, SpanAttempt,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.Int("gatehouse.webhook.delivery_id", j.ID),
			attribute.String("gatehouse.webhook.event_id", j.EventID),
			attribute.String("gatehouse.webhook.event_type", j.EventType),
			attribute.Int("gatehouse.app_id", j.AppID),
			attribute.Int("gatehouse.webhook.attempt", j.AttemptCount+1),
		),
		// Never the callback URL's path or query: ClientAttrs keeps
		// scheme, host and port.
		trace.WithAttributes(telemetry.ClientAttrs(http.MethodPost, j.CallbackURL)...))
	// The attempt's deadline and cancellation stay those of ctx.
	return trace.ContextWithSpan(ctx, span), span
}
