package outbound

import (
	"net/http"
	"strings"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
)

// breaker returns the circuit breaker of host, creating it on first use.
// Breakers live as long as the Client; the set of hosts gatehouse calls is
// small (configured services and partner callback hosts).
func (c *Client) breaker(host string) circuitbreaker.CircuitBreaker[*http.Response] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.breakers[host]; ok {
		return b
	}
	b := circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(breakerFailure).
		// Count based: opens once this many of the last BreakerWindow calls failed.
		WithFailureThresholdRatio(c.cfg.breakerFailures(), uint(c.cfg.BreakerWindow)).
		WithDelay(c.cfg.BreakerOpenWait).
		// Half open: this many trial calls are let through; all must succeed
		// to close, the first failure reopens.
		WithSuccessThreshold(uint(c.cfg.BreakerHalfOpenTrials)).
		OnStateChanged(func(e circuitbreaker.StateChangedEvent) {
			if c.onState != nil {
				c.onState(host, stateName(e.OldState), stateName(e.NewState))
			}
		}).
		Build()
	c.breakers[host] = b
	return b
}

// BreakerState returns StateClosed, StateOpen or StateHalfOpen for host,
// given as "host:port" (lower case, default port filled in, e.g.
// "api.example.com:443"). A host never called is closed.
//
// An open breaker whose wait has elapsed is reported half open: failsafe-go
// switches state lazily on the next call, but that call is a trial call.
func (c *Client) BreakerState(host string) string {
	c.mu.Lock()
	b, ok := c.breakers[strings.ToLower(host)]
	c.mu.Unlock()
	if !ok {
		return StateClosed
	}
	return effectiveState(b)
}

// BreakerStates returns the state of every host called so far, for metrics.
func (c *Client) BreakerStates() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.breakers))
	for h, b := range c.breakers {
		out[h] = effectiveState(b)
	}
	return out
}

func effectiveState(b circuitbreaker.CircuitBreaker[*http.Response]) string {
	s := b.State()
	if s == circuitbreaker.OpenState && b.RemainingDelay() == 0 {
		s = circuitbreaker.HalfOpenState
	}
	return stateName(s)
}

func stateName(s circuitbreaker.State) string {
	switch s {
	case circuitbreaker.OpenState:
		return StateOpen
	case circuitbreaker.HalfOpenState:
		return StateHalfOpen
	default:
		return StateClosed
	}
}
