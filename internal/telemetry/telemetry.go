// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables, and holds the helpers the rest of gatehouse uses
// to make spans and carry W3C trace context.
//
// Tracing is off unless the environment asks for it: then there is no
// tracer provider at all, the instrumentation of the database and Redis is
// not installed, and the request path makes no span (a nil *Tracing is
// "off" everywhere). See docs/operations.md.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of gatehouse's own spans.
const ScopeName = "gatehouse"

// Tracing is the process's tracing: a tracer provider and the W3C
// propagator. A nil *Tracing means tracing is off; every method is safe
// on it.
type Tracing struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	shutdown func(context.Context) error
}

// New returns a Tracing over provider (tests pass an SDK provider with an
// in-memory exporter). A nil provider gives nil: tracing off.
func New(provider trace.TracerProvider) *Tracing {
	if provider == nil {
		return nil
	}
	return &Tracing{provider: provider, tracer: provider.Tracer(ScopeName)}
}

// On reports whether tracing is on.
func (t *Tracing) On() bool { return t != nil }

// Provider is the tracer provider (nil when off): the database and Redis
// instrumentation take it.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Tracer is gatehouse's tracer; a no-op tracer when off.
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return noopTracer
	}
	return t.tracer
}

// Propagator is the W3C trace-context propagator: an admin caller's
// traceparent is honoured as the parent, a partner's becomes a link (see
// boundary.go); outgoing webhooks and refunds carry a fresh one.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Shutdown flushes the spans not yet exported and stops the exporter
// (bounded by ctx). Nothing to do when off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Wanted reports whether env asks for traces: an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER names the otlp exporter, and neither
// OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns them off.
func Wanted() bool {
	env := os.Getenv
	if strings.EqualFold(strings.TrimSpace(env("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(env("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false
	case "":
		return env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return true // validated by FromEnv
	}
}

// FromEnv builds the tracing the OTEL_* variables ask for, or returns nil
// (off) when they ask for none (Wanted). The OTLP/HTTP exporter reads its
// own variables (endpoint, headers, timeout, TLS, compression), the SDK
// the sampler (OTEL_TRACES_SAMPLER, default parentbased_always_on), the
// batch processor (OTEL_BSP_*) and the resource (OTEL_SERVICE_NAME,
// default "gatehouse", and OTEL_RESOURCE_ATTRIBUTES). version is the
// build's, recorded as service.version.
//
// The global OpenTelemetry provider and propagator are set too, for
// libraries that read them.
func FromEnv(ctx context.Context, version string) (*Tracing, error) {
	env := os.Getenv
	if !Wanted() {
		return nil, nil
	}
	var errs []error
	if exp := strings.ToLower(strings.TrimSpace(env("OTEL_TRACES_EXPORTER"))); exp != "" && exp != "otlp" {
		errs = append(errs, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: gatehouse exports traces with otlp (or none)", exp))
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := strings.TrimSpace(env(k)); p != "" && p != "http/protobuf" {
			errs = append(errs, fmt.Errorf("%s=%s: gatehouse sends OTLP over HTTP (http/protobuf); point it at the collector's HTTP port (4318)", k, p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName("gatehouse")}
	if version != "" {
		attrs = append(attrs, semconv.ServiceVersion(version))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	t := New(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}
