package outbound

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the Clients created WithMetrics, on the process's default
// registry (served at /metrics on the admin listener). The target label is
// the breaker key of the calls (CallOptions.BreakerKey, e.g. "payment").
var (
	callsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_outbound_calls_total",
		Help: "Requests sent to an external service, every attempt (retries included) counted, by target.",
	}, []string{"target"})
	failuresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_outbound_failures_total",
		Help: "Requests to an external service that failed (no reply, a timeout, or a 5xx reply): what the circuit breaker counts, by target.",
	}, []string{"target"})
	rejectedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_outbound_rejected_total",
		Help: "Calls to an external service refused by its open circuit breaker (nothing sent), by target.",
	}, []string{"target"})
	breakerStateDesc = prometheus.NewDesc("gatehouse_outbound_breaker_state",
		"Circuit breaker of each external service target on this replica: 0 closed, 1 half open (trial calls), 2 open (calls refused).",
		[]string{"target"}, nil)
	connectionsDesc = prometheus.NewDesc("gatehouse_outbound_connections",
		"Connections open in the pool of the client that calls target (at most 200 in total, 50 per host).",
		[]string{"target"}, nil)
	connectionWaitsDesc = prometheus.NewDesc("gatehouse_outbound_connection_waits",
		"Calls waiting for a free connection because the pool of the client that calls target is full.",
		[]string{"target"}, nil)
)

// meteredClients holds the Clients whose breakers /metrics reports.
var meteredClients = &breakerCollector{clients: map[*Client]bool{}}

func init() {
	prometheus.MustRegister(callsTotal, failuresTotal, rejectedTotal, meteredClients)
}

// WithMetrics counts the Client's calls, failures and refusals per target
// (the calls' breaker key) and reports its breakers' states, in
// gatehouse_outbound_*; targets are reported (closed, counters at 0) from
// the start, before their first call. Close stops the reporting. Meant for
// Clients whose breaker keys are a few fixed names (such as "payment"),
// not URLs.
func WithMetrics(targets ...string) Option {
	return func(c *Client) {
		c.metered = true
		c.targets = append(c.targets, targets...)
	}
}

// startMetrics makes the declared targets visible and reports the Client.
func (c *Client) startMetrics() {
	if !c.metered {
		return
	}
	for _, t := range c.targets {
		c.breaker(t)
		callsTotal.WithLabelValues(t)
		failuresTotal.WithLabelValues(t)
		rejectedTotal.WithLabelValues(t)
	}
	meteredClients.add(c)
}

func (c *Client) count(key string, resp *http.Response, err error) {
	if !c.metered {
		return
	}
	callsTotal.WithLabelValues(key).Inc()
	if breakerFailure(resp, err) {
		failuresTotal.WithLabelValues(key).Inc()
	}
}

func (c *Client) countRejected(key string) {
	if c.metered {
		rejectedTotal.WithLabelValues(key).Inc()
	}
}

type breakerCollector struct {
	mu      sync.Mutex
	clients map[*Client]bool
}

func (m *breakerCollector) add(c *Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clients[c] = true
}

func (m *breakerCollector) remove(c *Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.clients, c)
}

func (m *breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakerStateDesc
	ch <- connectionsDesc
	ch <- connectionWaitsDesc
}

// Collect reports at scrape time each target's breaker state (a target
// known to several Clients reports the worst) and the connection pool of
// the Clients declared for it (summed).
func (m *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	clients := make([]*Client, 0, len(m.clients))
	for c := range m.clients {
		clients = append(clients, c)
	}
	m.mu.Unlock()
	worst := map[string]float64{}
	conns, waits := map[string]float64{}, map[string]float64{}
	for _, c := range clients {
		for key, st := range c.BreakerStates() {
			worst[key] = max(worst[key], stateValue(st))
		}
		for _, t := range c.targets {
			conns[t] += float64(c.limiter.open())
			waits[t] += float64(c.limiter.waiting.Load())
		}
	}
	for key, v := range worst {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, v, key)
	}
	for t := range conns {
		ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, conns[t], t)
		ch <- prometheus.MustNewConstMetric(connectionWaitsDesc, prometheus.GaugeValue, waits[t], t)
	}
}

func stateValue(st string) float64 {
	switch st {
	case StateOpen:
		return 2
	case StateHalfOpen:
		return 1
	}
	return 0
}
