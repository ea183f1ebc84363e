package payment

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/telemetry"
)

// SpanRefund is the name of the span of one refund call (its retries
// included) to the payment provider.
const SpanRefund = "payment refund"

// traceRefund starts the refund call's span, a child of ctx's (the
// refundOrder field's); off: ctx and a no-op span.
func (s *Service) traceRefund(ctx context.Context, orderNo string) (context.Context, trace.Span) {
	if !s.tracing.On() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return s.tracing.Tracer().Start(ctx, SpanRefund, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gatehouse.order_no", orderNo)),
		// The provider URL's path or query may hold credentials of the
		// provider's own: ClientAttrs keeps neither.
		trace.WithAttributes(telemetry.ClientAttrs(http.MethodPost, s.refundsURL())...))
}

// endRefund records the provider's answer on span.
func endRefund(span trace.Span, resp *http.Response, err error) {
	if !span.IsRecording() {
		return
	}
	switch {
	case err != nil:
		span.SetStatus(codes.Error, problem(err))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		span.SetStatus(codes.Error, "HTTP "+strconv.Itoa(resp.StatusCode))
	default:
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	}
}
