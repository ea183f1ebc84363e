package webhook_test

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gatehouse/internal/telemetry/telemetrytest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestCallbackURLRedactedForEveryHostForm: a callback URL whose host is
// not plain ASCII — "partner。example" with U+3002 (an ideographic full
// stop), or the same percent-encoded — fails with a transport error whose
// text (net/http's) names the URL re-encoded; its query reaches neither
// the log, nor the delivery's lastError (readable by READ_ONLY keys) and
// its attempts' error, nor the attempt's exported span. (Names fail to
// resolve without a query leaving the machine: NoDNS.)
func TestCallbackURLRedactedForEveryHostForm(t *testing.T) {
	t.Cleanup(webhook.NoDNS())
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rec := telemetrytest.New(t)
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, Tracing: rec.Tracing, RetryBase: time.Hour})
		for _, host := range []string{"partner。example", "partner%E3%80%82example"} {
			const secret = "SECRET-token-7c1f"
			appID, _ := e.newApp(t, "https://"+host+"/hooks/in?token="+secret)
			id := e.pay(t, appID).ID
			d := e.waitStatus(t, id, dispatch.StatusRetrying, 10*time.Second)
			if d.LastError == "" || strings.Contains(d.LastError, secret) || strings.Contains(d.LastError, "/hooks/in") {
				t.Errorf("%s: lastError %q, want the error without the URL's path and query", host, d.LastError)
			}
			for _, a := range e.attempts(t, id) {
				if strings.Contains(a.Error, secret) {
					t.Errorf("%s: attempt error %q leaks the query", host, a.Error)
				}
			}
			span := rec.Wait(t, "attempt of "+host, func(s tracetest.SpanStub) bool {
				v, _ := telemetrytest.Attr(s, "gatehouse.app_id")
				return s.Name == dispatch.SpanAttempt && v.AsInt64() == int64(appID)
			})
			if span.Status.Description == "" {
				t.Errorf("%s: the attempt's span has no failure status", host)
			}
			if strings.Contains(span.Status.Description, secret) {
				t.Errorf("%s: span status %q leaks the query", host, span.Status.Description)
			}
			for _, s := range rec.Spans() {
				for _, kv := range s.Attributes {
					if strings.Contains(kv.Value.String(), secret) {
						t.Errorf("%s: span %s attribute %s leaks the query", host, s.Name, kv.Key)
					}
				}
			}
		}
		if logs := e.logs.String(); strings.Contains(logs, "SECRET") || !strings.Contains(logs, "attempt failed") {
			t.Errorf("the log leaks the query, or has no failure line:\n%s", logs)
		}
	})
}
