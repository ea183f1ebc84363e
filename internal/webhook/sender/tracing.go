package sender

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/telemetry"
)

// SpanAttempt is the name of the span of one delivery attempt.
const SpanAttempt = "webhook attempt"

// traceAttempt starts the span of one attempt of j, a child of the trace
// context its event was queued in (so it shows under the payOrder, say,
// that caused it), or a new trace when there is none. Off: ctx and a
// no-op span, nothing allocated.
func (s *Service) traceAttempt(ctx context.Context, j job) (context.Context, trace.Span) {
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

// endAttempt records o on span: the reply's status and, on failure, the
// redacted failure text (never the callback URL's path or query).
// Nothing when no request was sent.
func endAttempt(span trace.Span, o *outcome, callbackURL string) {
	if !span.IsRecording() || (o.status == 0 && o.err == nil) {
		return // off, or no attempt was made (breaker open)
	}
	if o.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", o.status))
	}
	if !o.success() {
		span.SetStatus(codes.Error, failureText(o, callbackURL))
	}
}

// injectTrace writes a fresh traceparent into the request, and no
// tracestate: the receiver is outside the trust boundary and learns
// nothing of the internal trace (telemetry.InjectExternal). The attempt's
// span records the trace id sent, to find the receiver's trace.
func injectTrace(ctx context.Context, h http.Header) {
	if sc := telemetry.InjectExternal(ctx, h); sc.IsValid() {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String(telemetry.AttrExternalTraceID, sc.TraceID().String()))
	}
}
