package dispatch

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/ent/webhookeventtype"
	"gatehouse/internal/webhook/sender"
)

// Metrics on the process's default registry (served at /metrics on the
// admin listener).
var (
	// failedTotal is the alert: a delivery ran out of retries. Alert on
	// increase(gatehouse_webhook_deliveries_failed_total[5m]) > 0.
	failedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_webhook_deliveries_failed_total",
		Help: "Webhook deliveries that reached FAILED after exhausting their retries (alert on any increase).",
	}, []string{"event_type"})
	attemptsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_webhook_attempts_total",
		Help: "Webhook delivery attempts by result (success: 2xx reply).",
	}, []string{"result"})
	attemptSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gatehouse_webhook_attempt_duration_seconds",
		Help:    "Duration of webhook delivery attempts.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	})
	firstAttemptLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gatehouse_webhook_first_attempt_latency_seconds",
		Help:    "Time from an event being committed to the start of its first delivery attempt.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})
)

func init() {
	prometheus.MustRegister(failedCounters{}, attemptsTotal, attemptSeconds, firstAttemptLatency, backlog)
	// The alerts' counters exist at 0 from the start, per known label value.
	for _, r := range []string{"success", "failure"} {
		attemptsTotal.WithLabelValues(r)
	}
	// failedTotal's labels are the event types: the built-in ones exist
	// from newCatalogue on, the custom ones from the scrape after they
	// were declared (failedCounters).
}

// failedCounters serves failedTotal with a series at 0 for every declared
// event type: the custom types are read from the database at each scrape
// (at most MaxCustomTypes names), so that a type declared before this
// replica started, or on another replica since, has its counter before
// its first FAILED delivery, and the alert's increase() sees that one.
type failedCounters struct{}

func (failedCounters) Describe(ch chan<- *prometheus.Desc) { failedTotal.Describe(ch) }

func (failedCounters) Collect(ch chan<- prometheus.Metric) {
	if s := backlog.any(); s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		// A failing database leaves the types already known (the
		// readiness alert speaks for it).
		if names, err := s.client.WebhookEventType.Query().Select(webhookeventtype.FieldName).Strings(ctx); err == nil {
			for _, n := range names {
				failedTotal.WithLabelValues(n)
			}
		}
		cancel()
	}
	failedTotal.Collect(ch)
}

func alertFailed(eventType string) { failedTotal.WithLabelValues(eventType).Inc() }

func (s *Dispatcher) observe(j job, o *sender.Outcome, attemptNo int) {
	result := "failure"
	if o.Success() {
		result = "success"
	}
	attemptsTotal.WithLabelValues(result).Inc()
	attemptSeconds.Observe(o.Duration.Seconds())
	if attemptNo == 1 {
		firstAttemptLatency.Observe(max(o.Started.Sub(j.CreateTime), time.Duration(0)).Seconds())
	}
}
