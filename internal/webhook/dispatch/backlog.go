package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/internal/webhook/dispatch/adapter"
)

// maxBacklogCount caps the count of gatehouse_webhook_due_deliveries: a
// scrape must stay cheap however large the backlog.
const maxBacklogCount = 10000

var backlogDesc = prometheus.NewDesc("gatehouse_webhook_due_deliveries",
	"Webhook deliveries due now and not yet attempted, of apps that may receive (counted up to 10000 at scrape time; held deliveries of disabled or expired apps and of disabled endpoints are not counted).",
	nil, nil)

// backlog reports the due deliveries of the running Services (one is
// enough: they share the table).
var backlog = &backlogCollector{services: map[*Dispatcher]bool{}}

type backlogCollector struct {
	mu       sync.Mutex
	services map[*Dispatcher]bool
}

func (c *backlogCollector) add(s *Dispatcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.services[s] = true
}

func (c *backlogCollector) remove(s *Dispatcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.services, s)
}

// any is one of the running Services, nil when none runs.
func (c *backlogCollector) any() *Dispatcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.services {
		return s
	}
	return nil
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- backlogDesc }

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.any()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := s.now()
	var n int64
	// A failing database leaves the metric out of this scrape (the
	// readiness alert speaks for it).
	if err := s.db.SQL.QueryRowContext(ctx, adapter.DueSQL, adapter.DueParams{Now: now, DayAgo: now.Add(-24 * time.Hour), Max: maxBacklogCount}.Args()...).Scan(&n); err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(n))
}
