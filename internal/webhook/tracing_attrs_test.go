package webhook_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gatehouse/internal/telemetry"
	"gatehouse/internal/telemetry/telemetrytest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestAttemptSpanSemanticAttributes: an attempt's client span carries
// what tools read from a client span: the method, server.address (the
// host alone, not host:port), server.port, and url.full without the
// callback URL's path or query (the partner's own secrets).
func TestAttemptSpanSemanticAttributes(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		rcv := newReceiver(t, always(http.StatusOK))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, Tracing: telemetry.New(tp)})
		appID, _ := e.newApp(t, rcv.URL+"/hooks/partner-path?token=partner-own-token")
		ctx, pay := tp.Tracer("test").Start(context.Background(), "payOrder")
		id := payIn(ctx, t, e, appID)
		pay.End()
		e.waitStatus(t, id, dispatch.StatusSuccess, 5*time.Second)

		u, err := url.Parse(rcv.URL)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(u.Port())
		var attempt tracetest.SpanStub
		waitFor(t, 5*time.Second, func() bool {
			for _, s := range spans.GetSpans() {
				if s.Name == dispatch.SpanAttempt {
					attempt = s
					return true
				}
			}
			return false
		}, func() string { return "no attempt span was exported" })
		for k, want := range map[string]any{
			"http.request.method": "POST",
			"server.address":      u.Hostname(),
			"server.port":         int64(port),
			"url.full":            "http://" + u.Host + "/REDACTED",
		} {
			v, ok := telemetrytest.Attr(attempt, attribute.Key(k))
			if !ok || v.AsInterface() != want {
				t.Errorf("attribute %s = %v, want %v", k, v.AsInterface(), want)
			}
		}
	})
}
