package webhook

import dto "github.com/prometheus/client_model/go"

// Test-only access to the alert counter.

// FailedTotal returns the alert counter's value for eventType.
func FailedTotal(eventType string) float64 {
	var m dto.Metric
	_ = failedTotal.WithLabelValues(eventType).Write(&m)
	return m.GetCounter().GetValue()
}
