package sender

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/telemetry"
)

// EndSpan records o on span: the reply's status and, on failure, the
// redacted failure text (never the callback URL's path or query).
// Nothing when no request was sent.
func EndSpan(span trace.Span, o *Outcome, callbackURL string) {
	if !span.IsRecording() || (o.Status == 0 && o.Err == nil) {
		return // off, or no attempt was made (breaker open)
	}
	if o.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", o.Status))
	}
	if !o.Success() {
		span.SetStatus(codes.Error, FailureText(o, callbackURL))
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
