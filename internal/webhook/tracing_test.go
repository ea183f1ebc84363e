package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/order"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestAttemptSpanIsChildOfTheBusinessTransaction: the outbox row keeps the
// trace context of the transaction that paid the order (its tracestate
// too); the attempt's span is its child. The receiver, outside the trust
// boundary, gets a fresh traceparent — another trace id, recorded on the
// attempt's span — and no tracestate. Without tracing nothing is stored
// or sent.
func TestAttemptSpanIsChildOfTheBusinessTransaction(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		rcv := newReceiver(t, always(http.StatusOK))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, Tracing: telemetry.New(tp)})
		appID, _ := e.newApp(t, rcv.URL+"/hooks?token=partner-own-token")

		// An admin's context with an inner tracestate, as the admin
		// listener takes it.
		ts, err := trace.ParseTraceState("internal=admin-secret-state")
		if err != nil {
			t.Fatal(err)
		}
		admin := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
			TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
		ctx, pay := tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(context.Background(), admin), "payOrder")
		id := payIn(ctx, t, e, appID)
		pay.End()
		psc := pay.SpanContext()

		d := e.delivery(t, id)
		if !strings.Contains(d.Traceparent, psc.TraceID().String()+"-"+psc.SpanID().String()) {
			t.Fatalf("outbox traceparent = %q, want the payOrder span %s/%s", d.Traceparent, psc.TraceID(), psc.SpanID())
		}
		e.waitStatus(t, id, dispatch.StatusSuccess, 5*time.Second)
		var attempt sdktrace.ReadOnlySpan
		waitFor(t, 5*time.Second, func() bool {
			for _, s := range spans.GetSpans().Snapshots() {
				if s.Name() == dispatch.SpanAttempt {
					attempt = s
				}
			}
			return attempt != nil
		}, func() string { return "no attempt span was exported" })
		if attempt.Parent().SpanID() != psc.SpanID() || attempt.SpanContext().TraceID() != psc.TraceID() {
			t.Errorf("attempt span's parent = %s/%s, want the payOrder span %s/%s",
				attempt.Parent().TraceID(), attempt.Parent().SpanID(), psc.TraceID(), psc.SpanID())
		}
		if attempt.SpanKind() != trace.SpanKindClient {
			t.Errorf("attempt span kind = %s, want client", attempt.SpanKind())
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range attempt.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		if got := attrs["gatehouse.webhook.event_type"].AsString(); got != order.EventPaid {
			t.Errorf("event_type attribute = %q", got)
		}
		if got := attrs["http.response.status_code"].AsInt64(); got != http.StatusOK {
			t.Errorf("status attribute = %d", got)
		}
		for k, v := range attrs {
			if strings.Contains(v.String(), "partner-own-token") {
				t.Errorf("attribute %s leaks the callback URL's query: %s", k, v.String())
			}
		}
		if !strings.Contains(d.Tracestate, "internal=") {
			t.Errorf("outbox tracestate = %q, want the transaction's", d.Tracestate)
		}
		h := rcv.requests()[0].header
		got := h.Get("traceparent")
		want := fmt.Sprintf("00-%s-", attrs[telemetry.AttrExternalTraceID].AsString())
		if !strings.HasPrefix(got, want) || len(got) != 55 || strings.Contains(got, psc.TraceID().String()) || strings.Contains(got, attempt.SpanContext().SpanID().String()) {
			t.Errorf("receiver's traceparent = %q, want a fresh trace (%s…) naming neither the internal trace %s nor the attempt's span", got, want, psc.TraceID())
		}
		if v := h.Values("tracestate"); len(v) != 0 {
			t.Errorf("receiver's tracestate = %q, want none from inside", v)
		}
	})
}

func TestNoTraceContextWhenTracingIsOff(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusOK))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		appID, _ := e.newApp(t, rcv.URL+"/hooks")
		id := payIn(context.Background(), t, e, appID)
		if d := e.delivery(t, id); d.Traceparent != "" || d.Tracestate != "" {
			t.Errorf("untraced outbox row keeps %q/%q", d.Traceparent, d.Tracestate)
		}
		e.waitStatus(t, id, dispatch.StatusSuccess, 5*time.Second)
		if h := rcv.requests()[0].header; h.Get("traceparent") != "" {
			t.Errorf("untraced webhook carries traceparent %q", h.Get("traceparent"))
		}
	})
}

// payIn creates and pays an order of app appID in ctx, returning its
// order.paid delivery's id.
func payIn(ctx context.Context, t *testing.T, e *env, appID int) int {
	t.Helper()
	no := "TR-" + testenv.RandomSuffix()
	if _, err := e.orders.Create(ctx, order.CreateInput{AppID: appID, OrderNo: no, Amount: "1.00"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.orders.Pay(ctx, no); err != nil {
		t.Fatal(err)
	}
	d, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.BizDataContains(`"` + no + `"`)).Only(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return d.ID
}
