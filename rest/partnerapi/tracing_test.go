package partnerapi_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/httpx"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/telemetry/telemetrytest"
	"gatehouse/internal/testenv"
)

// TestServerSpanOfASignedQuery: one server span per request, named by the
// route pattern, with the app key and the envelope's code (never the
// secret or the signature); the database (and on that backend, Redis)
// calls are its children; the request's log line carries its trace id.
func TestServerSpanOfASignedQuery(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rec := telemetrytest.New(t)
		e := apptest.Start(t, b, func(c *config.Config) { c.Tracing = rec.Tracing })
		app, sec := createApp(t, e, partner.CreateInput{})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "TR1", Amount: "3.10"})
		q := signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "TR1"})
		call(t, e, "GET", orderURL(e, "v1")+q).expect(t, 200, 200, "success")

		const name = "GET /api/v1/orders/query"
		srv := rec.Wait(t, name, telemetrytest.Named(name))
		if srv.SpanKind != trace.SpanKindServer {
			t.Errorf("kind %s, want server", srv.SpanKind)
		}
		for k, want := range map[string]string{"http.route": "/api/v1/orders/query", string(httpx.AttrAppKey): app.AppKey} {
			if v, _ := telemetrytest.Attr(srv, attrKey(k)); v.AsString() != want {
				t.Errorf("attribute %s = %q, want %q", k, v.String(), want)
			}
		}
		if v, _ := telemetrytest.Attr(srv, httpx.AttrCode); v.AsInt64() != 200 {
			t.Errorf("code attribute = %s, want 200", v.String())
		}
		for _, s := range rec.Spans() {
			for _, kv := range s.Attributes {
				if v := kv.Value.String(); strings.Contains(v, sec) || strings.Contains(v, "sign=") {
					t.Errorf("span %s attribute %s leaks the secret or signature: %s", s.Name, kv.Key, v)
				}
			}
		}
		rec.Wait(t, "of the database under the request", func(s tracetest.SpanStub) bool {
			return isDBScope(s.InstrumentationScope.Name) && rec.Under(s, srv.SpanContext)
		})
		if !b.Embedded() {
			rec.Wait(t, "of Redis under the request", func(s tracetest.SpanStub) bool {
				return strings.Contains(s.InstrumentationScope.Name, "redisotel") && rec.Under(s, srv.SpanContext)
			})
		}
		if logs := e.Logs.String(); !strings.Contains(logs, "trace_id="+srv.SpanContext.TraceID().String()) {
			t.Errorf("no request line with trace_id=%s:\n%s", srv.SpanContext.TraceID(), logs)
		}

		// A refused call: its code, and no app key (it was not admitted).
		call(t, e, "GET", orderURL(e, "v1")+"app_key=nope").expect(t, 401, 4001, "invalid app key")
		refused := rec.Wait(t, "of the refused call", func(s tracetest.SpanStub) bool {
			v, _ := telemetrytest.Attr(s, httpx.AttrCode)
			return s.Name == name && v.AsInt64() == 4001
		})
		if _, ok := telemetrytest.Attr(refused, httpx.AttrAppKey); ok {
			t.Error("a refused call's span names an app key")
		}
	})
}

// TestNoTracingWithoutOTEL: with tracing off nothing is traced, not even
// through OpenTelemetry's global provider, and the log lines have no
// trace_id.
func TestNoTracingWithoutOTEL(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rec := telemetrytest.New(t)
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(rec.Provider)
		t.Cleanup(func() { otel.SetTracerProvider(prev) })
		e := apptest.Start(t, b)
		if e.App.Cfg.Tracing.On() {
			t.Fatal("tracing on without OTEL_* variables")
		}
		app, sec := createApp(t, e, partner.CreateInput{})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "TR0", Amount: "3.10"})
		call(t, e, "GET", orderURL(e, "v1")+signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "TR0"})).expect(t, 200, 200, "success")
		_ = e.App.Close(context.Background())
		if n := len(rec.Spans()); n != 0 {
			t.Errorf("%d spans with tracing off:\n%s", n, rec.Dump())
		}
		if logs := e.Logs.String(); strings.Contains(logs, "trace_id") || !strings.Contains(logs, "/api/v1/orders/query") {
			t.Errorf("request lines without tracing:\n%s", logs)
		}
	})
}

func isDBScope(name string) bool {
	return strings.Contains(name, "otelpgx") || strings.Contains(name, "otelsql")
}

func attrKey(k string) attribute.Key { return attribute.Key(k) }

// TestPartnerTraceparentIsALink: a partner's traceparent (and
// tracestate) on the public listener does not make gatehouse's server
// span its child: the span starts a trace of its own (no parent) and
// links the partner's context; the request's log line names gatehouse's
// trace. The partner is outside the trust boundary.
func TestPartnerTraceparentIsALink(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rec := telemetrytest.New(t)
		e := apptest.Start(t, b, func(c *config.Config) { c.Tracing = rec.Tracing })
		app, sec := createApp(t, e, partner.CreateInput{})
		createOrder(t, e, order.CreateInput{AppID: app.ID, OrderNo: "TL1", Amount: "3.10"})
		const partnerTrace, partnerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		q := signedQuery(app.AppKey, sec, nowMillis(), freshNonce(), pair{"order_no", "TL1"})
		r := e.Do(t, "GET", orderURL(e, "v1")+q, "",
			"traceparent", "00-"+partnerTrace+"-"+partnerSpan+"-01", "tracestate", "partner=chosen")
		if r.Status != 200 {
			t.Fatalf("signed query: HTTP %d %s", r.Status, r.Body)
		}
		const name = "GET /api/v1/orders/query"
		srv := rec.Wait(t, name, telemetrytest.Named(name))
		if srv.Parent.IsValid() {
			t.Errorf("server span's parent %s/%s: the partner's context became the parent", srv.Parent.TraceID(), srv.Parent.SpanID())
		}
		if got := srv.SpanContext.TraceID().String(); got == partnerTrace {
			t.Errorf("server span is in the partner's trace %s", got)
		}
		if len(srv.Links) != 1 || srv.Links[0].SpanContext.TraceID().String() != partnerTrace || srv.Links[0].SpanContext.SpanID().String() != partnerSpan {
			t.Errorf("links %+v, want one to the partner's %s/%s", srv.Links, partnerTrace, partnerSpan)
		}
		if logs := e.Logs.String(); strings.Contains(logs, "trace_id="+partnerTrace) || !strings.Contains(logs, "trace_id="+srv.SpanContext.TraceID().String()) {
			t.Errorf("request line's trace_id is not gatehouse's own:\n%s", logs)
		}
	})
}
