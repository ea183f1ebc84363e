package graph_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/config"
	"gatehouse/internal/httpx"
	"gatehouse/internal/payment"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/telemetry/telemetrytest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook/dispatch"
)

// TestTracePayOrderToWebhookAndRefund: the admin request's server span
// names the API key (never the key itself) and is the child of the
// admin's traceparent (admins are inside the trust boundary); payOrder has
// its own span with the database calls under it; the order.paid
// delivery's attempt span is a child of payOrder, and the receiver, being
// outside, gets a fresh traceparent (another trace id, recorded on the
// attempt's span) and none of the admin's tracestate; refundOrder's call
// to the provider has a span, and the provider likewise gets a fresh
// traceparent. A failing field's code is on its span and the server span.
func TestTracePayOrderToWebhookAndRefund(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rec := telemetrytest.New(t)
		var mu sync.Mutex
		var hooks []http.Header
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			hooks = append(hooks, r.Header.Clone())
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(sink.Close)
		provider := paymenttest.New(t)
		a := graphtest.StartAdmin(t, b, withProvider(provider), func(c *config.Config) { c.Tracing = rec.Tracing })
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Traced", "callbackURL": sink.URL + "/hook?token=own"}}).OK(t, "createPartnerApp")
		appID := graphtest.Str(p, "app", "id")
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "T-1", amount: "9.90"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		const adminTrace, adminSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
		r := a.Do(t, "POST", a.AdminURL+"/graphql", `{"query":"mutation { payOrder(orderNo: \"T-1\") { status } }"}`,
			"Content-Type", "application/json", "X-API-Key", a.Key,
			"traceparent", "00-"+adminTrace+"-"+adminSpan+"-01", "tracestate", "internal=admin-secret-state")
		if r.Status != 200 || strings.Contains(string(r.Body), "errors") {
			t.Fatalf("payOrder: HTTP %d %s", r.Status, r.Body)
		}

		pay := rec.Wait(t, "payOrder", telemetrytest.Named("payOrder"))
		srv := rec.Wait(t, "POST /graphql of payOrder", func(s tracetest.SpanStub) bool {
			return s.Name == "POST /graphql" && s.SpanContext.SpanID() == pay.Parent.SpanID()
		})
		if srv.Parent.TraceID().String() != adminTrace || srv.Parent.SpanID().String() != adminSpan {
			t.Errorf("admin request's server span parent %s/%s, want the admin's %s/%s", srv.Parent.TraceID(), srv.Parent.SpanID(), adminTrace, adminSpan)
		}
		if v, _ := telemetrytest.Attr(srv, httpx.AttrAPIKeyName); v.AsString() != "test" {
			t.Errorf("api key name attribute = %q, want the key's name", v.String())
		}
		rec.Wait(t, "of the database under payOrder", func(s tracetest.SpanStub) bool {
			return isDBScope(s.InstrumentationScope.Name) && rec.Under(s, pay.SpanContext)
		})
		attempt := rec.Wait(t, "webhook attempt", telemetrytest.Named(dispatch.SpanAttempt))
		if attempt.Parent.SpanID() != pay.SpanContext.SpanID() || attempt.SpanContext.TraceID() != pay.SpanContext.TraceID() {
			t.Errorf("attempt's parent %s, want payOrder %s", attempt.Parent.SpanID(), pay.SpanContext.SpanID())
		}
		mu.Lock()
		got, state := hooks[0].Get("traceparent"), hooks[0].Values("tracestate")
		mu.Unlock()
		external(t, "webhook", got, attempt, pay.SpanContext.TraceID().String())
		if len(state) != 0 {
			t.Errorf("webhook tracestate %q: the admin's state went out", state)
		}

		a.GQL(t, refund, map[string]any{"no": "T-1"}).OK(t, "refundOrder")
		ref := rec.Wait(t, "refundOrder", telemetrytest.Named("refundOrder"))
		call := rec.Wait(t, payment.SpanRefund, telemetrytest.Named(payment.SpanRefund))
		if !rec.Under(call, ref.SpanContext) {
			t.Errorf("refund call span is not under refundOrder")
		}
		if !b.Embedded() {
			rec.Wait(t, "of Redis under refundOrder", func(s tracetest.SpanStub) bool {
				return strings.Contains(s.InstrumentationScope.Name, "redisotel") && rec.Under(s, ref.SpanContext)
			})
		}
		calls := provider.Calls()
		if len(calls) != 1 {
			t.Fatalf("provider calls %+v, want one", calls)
		}
		external(t, "refund", calls[0].Traceparent, call, call.SpanContext.TraceID().String())

		// A failing field: its code on its span and on the server span.
		a.GQL(t, `mutation { payOrder(orderNo: "NOPE") { status } }`, nil).Fails(t, "NOT_FOUND")
		failed := rec.Wait(t, "failed payOrder", func(s tracetest.SpanStub) bool {
			v, _ := telemetrytest.Attr(s, httpx.AttrCode)
			return s.Name == "payOrder" && v.AsString() == "NOT_FOUND"
		})
		rec.Wait(t, "server span with the code", func(s tracetest.SpanStub) bool {
			v, _ := telemetrytest.Attr(s, httpx.AttrCode)
			return s.SpanContext.SpanID() == failed.Parent.SpanID() && v.AsString() == "NOT_FOUND"
		})
		for _, s := range rec.Spans() {
			for _, kv := range s.Attributes {
				if v := kv.Value.String(); strings.Contains(v, a.Key) || strings.Contains(v, "token=own") {
					t.Errorf("span %s attribute %s leaks a secret: %s", s.Name, kv.Key, v)
				}
			}
		}
	})
}

func isDBScope(name string) bool {
	return strings.Contains(name, "otelpgx") || strings.Contains(name, "otelsql")
}

// external fails unless traceparent, sent outside the trust boundary by
// the client span s, is a fresh sampled context: a trace id other than
// inner (the internal trace's), recorded on s as
// telemetry.AttrExternalTraceID, and a span id that is none of ours.
func external(t *testing.T, what, traceparent string, s tracetest.SpanStub, inner string) {
	t.Helper()
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || parts[0] != "00" || parts[3] != "01" {
		t.Errorf("%s traceparent %q, want a sampled W3C traceparent", what, traceparent)
		return
	}
	if parts[1] == inner || parts[2] == s.SpanContext.SpanID().String() {
		t.Errorf("%s traceparent %q carries the internal trace %s or span %s", what, traceparent, inner, s.SpanContext.SpanID())
	}
	if v, _ := telemetrytest.Attr(s, telemetry.AttrExternalTraceID); v.AsString() != parts[1] {
		t.Errorf("%s span's %s = %q, want the trace id sent, %s", what, telemetry.AttrExternalTraceID, v.AsString(), parts[1])
	}
}
