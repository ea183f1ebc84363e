package payment

import "github.com/prometheus/client_golang/prometheus"

// Refund outcomes (gatehouse_refunds_total{outcome}).
const (
	outcomeAccepted    = "accepted"     // the provider said yes
	outcomeRefused     = "refused"      // it answered, not 2xx
	outcomeFailed      = "failed"       // no answer, or 5xx, after the retries
	outcomeBreakerOpen = "breaker_open" // not called: its breaker is open
)

var refundsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gatehouse_refunds_total",
	Help: "Refund calls to the payment provider by outcome: accepted, refused (a 4xx answer or another non-2xx final answer), failed (no answer or 5xx after the retries), breaker_open (not called). Every outcome exists at 0 from the start.",
}, []string{"outcome"})

func init() {
	prometheus.MustRegister(refundsTotal)
	for _, o := range []string{outcomeAccepted, outcomeRefused, outcomeFailed, outcomeBreakerOpen} {
		refundsTotal.WithLabelValues(o)
	}
}

func countRefund(outcome string) { refundsTotal.WithLabelValues(outcome).Inc() }
