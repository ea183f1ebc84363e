package dispatch

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Read-outs of the dispatcher's state and counters, for the webhook
// service's tests (which drive it from outside the package).

// FailedTotal returns the alert counter's value for eventType.
func FailedTotal(eventType string) float64 {
	var m dto.Metric
	_ = failedTotal.WithLabelValues(eventType).Write(&m)
	return m.GetCounter().GetValue()
}

// EndpointsDisabled returns gatehouse_webhook_endpoints_disabled_total.
func EndpointsDisabled() float64 {
	var m dto.Metric
	_ = endpointsDisabledTotal.Write(&m)
	return m.GetCounter().GetValue()
}

// UntilNextDue is how long s's dispatch loop would sleep after a claim
// made at claimedAt (a loop is built, not run).
func (s *Dispatcher) UntilNextDue(claimedAt time.Time) time.Duration {
	return newDispatcher(s).untilNextDue(claimedAt)
}

// Announcing is how many open transactions will announce queued work at
// their commit.
func (s *Dispatcher) Announcing() int {
	s.announcing.mu.Lock()
	defer s.announcing.mu.Unlock()
	return len(s.announcing.m)
}
