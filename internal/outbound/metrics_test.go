package outbound

import (
	"net/http"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

// TestMetrics: a metered client's target is reported from the start; calls,
// failures (what the breaker counts) and refusals are counted per attempt;
// the breaker state and the pool follow; a closed client is not reported.
func TestMetrics(t *testing.T) {
	const target = "metrics-test"
	cfg := testConfig()
	cfg.RetryAttempts = 1
	// Long enough that the breaker is still open when the gauge is read,
	// however slow the machine.
	cfg.BreakerOpenWait = time.Minute
	c := newClient(t, cfg, WithMetrics(target))
	value := func(name string) float64 {
		t.Helper()
		v, ok := testenv.Metric(t, name, "target", target)
		if !ok {
			t.Fatalf("%s{target=%q} is not reported", name, target)
		}
		return v
	}
	for _, name := range []string{"gatehouse_outbound_calls_total", "gatehouse_outbound_failures_total", "gatehouse_outbound_rejected_total",
		"gatehouse_outbound_breaker_state", "gatehouse_outbound_connections", "gatehouse_outbound_connection_waits"} {
		if v := value(name); v != 0 {
			t.Errorf("%s = %v before any call", name, v)
		}
	}
	status := 200
	srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })
	opt := CallOptions{BreakerKey: target}
	call := func() {
		if resp, err := get(t, c, srv.URL, opt); err == nil {
			resp.Body.Close()
		}
	}
	call()
	if value("gatehouse_outbound_connections") != 1 {
		t.Errorf("connections = %v, want the one kept alive", value("gatehouse_outbound_connections"))
	}
	status = 503
	for range 9 {
		call()
	}
	call() // refused: the breaker opened, 9 of the last 10 calls failed
	if calls, fails, rej := value("gatehouse_outbound_calls_total"), value("gatehouse_outbound_failures_total"), value("gatehouse_outbound_rejected_total"); calls != 10 || fails != 9 || rej != 1 {
		t.Errorf("calls %v failures %v rejected %v, want 10, 9, 1", calls, fails, rej)
	}
	if st := value("gatehouse_outbound_breaker_state"); st != 2 {
		t.Errorf("breaker state %v, want 2 (open)", st)
	}
	c.Close()
	if _, ok := testenv.Metric(t, "gatehouse_outbound_breaker_state", "target", target); ok {
		t.Error("a closed client is still reported")
	}
}
