package dispatch

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/ent"
	"gatehouse/internal/outbound"
	"gatehouse/internal/webhook/dispatch/adapter"
)

// halfOpenRecheck is how long a delivery waits when its endpoint's breaker
// is half open and all its trial calls are in flight.
const halfOpenRecheck = time.Second

// endpoint is the client and the circuit breaker an app's callback URL is
// called through. Each (app, callback URL) has its own breaker in the
// outbound client (window 10 calls, 50 % failures, 30 s open, 5 trials),
// so one partner's failing endpoint never opens another's.
type endpoint struct {
	client *outbound.Client
	key    string
}

// remaining is how long the endpoint's breaker still refuses attempts.
func (e endpoint) remaining() time.Duration { return e.client.BreakerRemaining(e.key) }

const endpointPrefix = "webhook app "

// endpointKey names the breaker of endpoint epID (of app appID) at URL u:
// a new URL starts with a closed breaker.
func endpointKey(appID, epID int, u string) string {
	return endpointPrefix + strconv.Itoa(appID) + " endpoint " + strconv.Itoa(epID) + " " + u
}

// parseEndpointKey returns the app id, endpoint id and URL of a breaker key.
func parseEndpointKey(key string) (appID, epID int, u string, ok bool) {
	rest, ok := strings.CutPrefix(key, endpointPrefix)
	if !ok {
		return 0, 0, "", false
	}
	f := strings.SplitN(rest, " ", 4)
	if len(f) != 4 || f[1] != "endpoint" {
		return 0, 0, "", false
	}
	a, err1 := strconv.Atoi(f[0])
	e, err2 := strconv.Atoi(f[2])
	return a, e, f[3], err1 == nil && err2 == nil
}

func (s *Dispatcher) endpoint(appKey string, appID, epID int, u string) endpoint {
	return endpoint{client: s.send.Client(appKey), key: endpointKey(appID, epID, u)}
}

// EndpointBreakerState returns the state of the circuit breaker of
// webhook endpoint ep (of the app with key appKey) on this replica:
// outbound.StateClosed, StateOpen or StateHalfOpen.
func (s *Dispatcher) EndpointBreakerState(appKey string, ep *ent.WebhookEndpoint) string {
	e := s.endpoint(appKey, ep.AppID, ep.ID, ep.URL)
	return e.client.BreakerState(e.key)
}

// postpone gives back the lease of j, whose endpoint's breaker refused the
// attempt, with no attempt used: the delivery is due again when the
// breaker lets trial calls through.
func (s *Dispatcher) postpone(j job, ep endpoint) {
	wait := ep.remaining()
	if wait <= 0 {
		wait = halfOpenRecheck // half open, every trial call in flight
	}
	s.postponeFor(j, wait)
}

// postponeFor gives back the lease of j with its next attempt wait from
// now, with no attempt used.
func (s *Dispatcher) postponeFor(j job, wait time.Duration) {
	ctx, cancel := storeCtx()
	defer cancel()
	now := s.now()
	if _, err := s.sql.Exec(ctx, nil, adapter.PostponeSQL, adapter.PostponeParams{DeliveryID: j.ID, Lease: j.Lease, NextAttemptAt: adapter.DBTime(now.Add(wait)), UpdateTime: now}.Args()...); err != nil {
		s.log.Error("webhook: postponing a delivery failed; its lease runs out by itself", "delivery_id", j.ID, "err", err)
	}
}

// BreakerChanged is the sender's OnBreaker, the outbound client's listener (it runs with the
// breaker locked, so the database work goes to a goroutine). When a
// breaker opens, the endpoint's waiting deliveries move to its half-open
// time, so the operator sees when they will be tried and no replica
// claims them meanwhile.
func (s *Dispatcher) BreakerChanged(client *outbound.Client, key, from, to string) {
	appID, epID, u, ok := parseEndpointKey(key)
	if !ok {
		return
	}
	log := s.log.With("app_id", appID, "endpoint_id", epID, "callback_host", hostOf(u), "from", from, "to", to)
	if to != outbound.StateOpen {
		log.Info("webhook endpoint circuit breaker changed state")
		return
	}
	go func() {
		wait := client.BreakerRemaining(key) // not before: the breaker is locked now
		log.Warn("webhook endpoint circuit breaker opened: no attempts until it lets trial calls through", "open_for", wait.String())
		if wait <= 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		now := s.now()
		if _, err := s.sql.Exec(ctx, nil, adapter.DeferSQL, adapter.DeferParams{EndpointID: epID, CallbackURL: u, Until: adapter.DBTime(now.Add(wait)), Now: now}.Args()...); err != nil {
			s.log.Error("webhook: moving deliveries to the breaker's half-open time failed; they are postponed one by one", "app_id", appID, "err", err)
		}
	}()
}

// breakerStateDesc is gatehouse_webhook_breaker_state{app}: per app (its
// id), the state of its endpoint's breaker on this replica, computed at
// scrape time: 0 closed, 1 half open, 2 open (the worst of the app's
// endpoints when its deliveries go to more than one URL).
var breakerStateDesc = prometheus.NewDesc("gatehouse_webhook_breaker_state",
	"Circuit breaker of each app's webhook endpoint on this replica: 0 closed, 1 half open (trial calls), 2 open (no attempts).",
	[]string{"app"}, nil)

// breakers collects the breaker states of every running Dispatcher.
var breakers = &breakerCollector{services: map[*Dispatcher]bool{}}

func init() { prometheus.MustRegister(breakers) }

type breakerCollector struct {
	mu       sync.Mutex
	services map[*Dispatcher]bool
}

func registerBreakers(s *Dispatcher) {
	breakers.mu.Lock()
	defer breakers.mu.Unlock()
	breakers.services[s] = true
}

func unregisterBreakers(s *Dispatcher) {
	breakers.mu.Lock()
	defer breakers.mu.Unlock()
	delete(breakers.services, s)
}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakerStateDesc }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var clients []*outbound.Client
	for s := range c.services {
		clients = append(clients, s.send.Clients()...)
	}
	c.mu.Unlock()
	worst := map[int]float64{}
	for _, cl := range clients {
		for key, st := range cl.BreakerStates() {
			if id, _, _, ok := parseEndpointKey(key); ok {
				worst[id] = max(worst[id], stateValue(st))
			}
		}
	}
	for id, v := range worst {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, v, strconv.Itoa(id))
	}
}

func stateValue(st string) float64 {
	switch st {
	case outbound.StateOpen:
		return 2
	case outbound.StateHalfOpen:
		return 1
	}
	return 0
}
