package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/telemetry"
)

// otelVars are the variables the tests set (each to "" unless given).
var otelVars = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER",
	"OTEL_BSP_SCHEDULE_DELAY",
}

func setEnv(t *testing.T, m map[string]string) {
	for _, k := range otelVars {
		t.Setenv(k, m[k])
	}
}

// TestOffUnlessAsked: no OTEL_* variable (or only the service name, or an
// explicit none / disabled SDK) gives no tracing at all: a nil *Tracing,
// whose tracer is a no-op.
func TestOffUnlessAsked(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "gh", "OTEL_TRACES_SAMPLER": "always_on"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
	} {
		setEnv(t, env)
		tr, err := telemetry.FromEnv(context.Background(), "test")
		if err != nil || tr != nil || tr.On() {
			t.Errorf("%v: FromEnv = %v, %v; want nil (off)", env, tr, err)
		}
		if _, span := tr.Tracer().Start(context.Background(), "x"); span.IsRecording() || span.SpanContext().IsValid() {
			t.Errorf("%v: the off tracer records", env)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestRefusesWhatItCannotExport: another exporter or the gRPC protocol is
// an error at start, not silently no traces.
func TestRefusesWhatItCannotExport(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
	} {
		setEnv(t, env)
		if _, err := telemetry.FromEnv(context.Background(), "test"); err == nil {
			t.Errorf("%v: no error", env)
		}
	}
}

// TestExportsOverOTLPHTTPAndFlushesOnShutdown: with an endpoint set,
// spans reach an OTLP/HTTP receiver at /v1/traces, the service named by
// OTEL_SERVICE_NAME; Shutdown flushes the batch.
func TestExportsOverOTLPHTTPAndFlushesOnShutdown(t *testing.T) {
	var posts atomic.Int32
	var body atomic.Value
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			body.Store(string(b))
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL,
		"OTEL_SERVICE_NAME":           "gatehouse-eu",
		"OTEL_BSP_SCHEDULE_DELAY":     "60000", // only Shutdown flushes
	}
	setEnv(t, env)
	tr, err := telemetry.FromEnv(context.Background(), "v-test")
	if err != nil || !tr.On() {
		t.Fatalf("FromEnv = %v, %v", tr, err)
	}
	_, span := tr.Tracer().Start(context.Background(), "flushed-span", trace.WithSpanKind(trace.SpanKindServer))
	if !span.IsRecording() {
		t.Fatal("span not recording with the default sampler")
	}
	span.End()
	if posts.Load() != 0 {
		t.Fatal("exported before Shutdown; the flush is not tested")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if posts.Load() != 1 {
		t.Fatalf("%d exports after Shutdown, want 1", posts.Load())
	}
	got, _ := body.Load().(string)
	for _, want := range []string{"flushed-span", "gatehouse-eu", "v-test"} {
		if !strings.Contains(got, want) {
			t.Errorf("export lacks %q", want)
		}
	}
}

// TestCaptureRoundTrip: a span's context in header form and back.
func TestCaptureRoundTrip(t *testing.T) {
	if c := telemetry.Capture(context.Background()); c != (telemetry.Context{}) {
		t.Errorf("untraced context captured %+v", c)
	}
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ts, _ := trace.ParseTraceState("vendor=x")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	c := telemetry.Capture(trace.ContextWithSpanContext(context.Background(), sc))
	if c.Traceparent != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" || c.Tracestate != "vendor=x" {
		t.Fatalf("Capture = %+v", c)
	}
	back := c.SpanContext()
	if back.TraceID() != tid || back.SpanID() != sid || !back.IsSampled() || !back.IsRemote() || back.TraceState().Get("vendor") != "x" {
		t.Errorf("SpanContext = %+v", back)
	}
	if (telemetry.Context{Traceparent: "garbage"}).SpanContext().IsValid() {
		t.Error("a malformed traceparent parsed as valid")
	}
}
