// Package telemetrytest records the spans of a test in memory.
package telemetrytest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/telemetry"
)

// Recorder is a tracing whose spans (every one sampled) are kept in memory.
type Recorder struct {
	Tracing  *telemetry.Tracing
	Provider *sdktrace.TracerProvider
	exporter *tracetest.InMemoryExporter
}

// New returns a Recorder, shut down when the test ends.
func New(t testing.TB) *Recorder {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &Recorder{Tracing: telemetry.New(tp), Provider: tp, exporter: exp}
}

// Spans are the ended spans so far.
func (r *Recorder) Spans() tracetest.SpanStubs { return r.exporter.GetSpans() }

// Wait polls until some ended span satisfies match (within 10 s) and
// returns it.
func (r *Recorder) Wait(t testing.TB, what string, match func(s tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, s := range r.Spans() {
			if match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %s among:\n%s", what, r.Dump())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Named matches a span by name.
func Named(name string) func(tracetest.SpanStub) bool {
	return func(s tracetest.SpanStub) bool { return s.Name == name }
}

// Under reports whether s descends from ancestor (through spans recorded so far).
func (r *Recorder) Under(s tracetest.SpanStub, ancestor trace.SpanContext) bool {
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, x := range r.Spans() {
		byID[x.SpanContext.SpanID()] = x
	}
	for p := s.Parent; p.IsValid(); {
		if p.SpanID() == ancestor.SpanID() && p.TraceID() == ancestor.TraceID() {
			return true
		}
		next, ok := byID[p.SpanID()]
		if !ok {
			return false
		}
		p = next.Parent
	}
	return false
}

// Attr returns s's attribute k ("" and false when absent).
func Attr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// Dump lists the recorded spans, for failure messages.
func (r *Recorder) Dump() string {
	var b strings.Builder
	for _, s := range r.Spans() {
		fmt.Fprintf(&b, "  %s [%s] %s parent %s scope %s %v\n", s.Name, s.SpanKind, s.SpanContext.SpanID(), s.Parent.SpanID(), s.InstrumentationScope.Name, s.Attributes)
	}
	return b.String()
}
