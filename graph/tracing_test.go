package graph_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gatehouse/internal/config"
	"gatehouse/internal/httpx"
	"gatehouse/internal/payment"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/telemetry/telemetrytest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// TestTracePayOrderToWebhookAndRefund: the admin request's server span
// names the API key (never the key itself); payOrder has its own span with
// the database calls under it; the order.paid delivery's attempt span is
// a child of payOrder, and the receiver gets that trace in traceparent;
// refundOrder's call to the provider has a span, and the provider gets its
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
		a := startAdmin(t, b, withProvider(provider), func(c *config.Config) { c.Tracing = rec.Tracing })
		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Traced", "callbackURL": sink.URL + "/hook?token=own"}}).ok(t, "createPartnerApp")
		appID := str(p, "app", "id")
		a.gql(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "T-1", amount: "9.90"}) { id } }`, map[string]any{"app": appID}).ok(t, "createOrder")
		a.gql(t, `mutation { payOrder(orderNo: "T-1") { status } }`, nil).ok(t, "payOrder")

		pay := rec.Wait(t, "payOrder", telemetrytest.Named("payOrder"))
		srv := rec.Wait(t, "POST /graphql of payOrder", func(s tracetest.SpanStub) bool {
			return s.Name == "POST /graphql" && s.SpanContext.SpanID() == pay.Parent.SpanID()
		})
		if v, _ := telemetrytest.Attr(srv, httpx.AttrAPIKeyName); v.AsString() != "test" {
			t.Errorf("api key name attribute = %q, want the key's name", v.String())
		}
		rec.Wait(t, "of the database under payOrder", func(s tracetest.SpanStub) bool {
			return isDBScope(s.InstrumentationScope.Name) && rec.Under(s, pay.SpanContext)
		})
		attempt := rec.Wait(t, "webhook attempt", telemetrytest.Named(webhook.SpanAttempt))
		if attempt.Parent.SpanID() != pay.SpanContext.SpanID() || attempt.SpanContext.TraceID() != pay.SpanContext.TraceID() {
			t.Errorf("attempt's parent %s, want payOrder %s", attempt.Parent.SpanID(), pay.SpanContext.SpanID())
		}
		mu.Lock()
		got := hooks[0].Get("traceparent")
		mu.Unlock()
		if want := fmt.Sprintf("00-%s-%s-01", pay.SpanContext.TraceID(), attempt.SpanContext.SpanID()); got != want {
			t.Errorf("webhook traceparent %q, want %q", got, want)
		}

		a.gql(t, refund, map[string]any{"no": "T-1"}).ok(t, "refundOrder")
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
		if want := fmt.Sprintf("00-%s-%s-01", call.SpanContext.TraceID(), call.SpanContext.SpanID()); len(calls) != 1 || calls[0].Traceparent != want {
			t.Errorf("provider calls %+v, want one with traceparent %s", calls, want)
		}

		// A failing field: its code on its span and on the server span.
		a.gql(t, `mutation { payOrder(orderNo: "NOPE") { status } }`, nil).fails(t, "NOT_FOUND")
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
