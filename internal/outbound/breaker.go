package outbound

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
)

// breaker is the circuit breaker of one key (a host, or a key the caller
// names). failsafe-go keeps the state and runs the half-open trials; the
// window of the closed state is judged here (see observe), and the open
// wait is also measured here, on the Client's clock, so that a test can
// move the clock instead of sleeping (failsafe-go reads the wall clock only).
type breaker struct {
	cb circuitbreaker.CircuitBreaker[*http.Response]

	mu       sync.Mutex
	openedAt time.Time // on the Client's clock; set on every move to OPEN
	// window holds the outcomes of the last calls while closed (true:
	// failure), at most Config.BreakerWindow of them.
	window []bool
	next   int
}

// breaker returns the circuit breaker of key, creating it on first use.
// Breakers live as long as the Client; the set of keys gatehouse calls is
// small (configured services and partner callback endpoints).
func (c *Client) breaker(key string) *breaker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.breakers[key]; ok {
		return b
	}
	b := &breaker{}
	b.cb = circuitbreaker.NewBuilder[*http.Response]().HandleIf(breakerFailure).
		// The failure rate is judged in observe, over a full window: the
		// rule is "at least BreakerWindow calls made, and the threshold
		// reached among the last BreakerWindow". failsafe-go's count-based
		// ratio judges a window that is not yet full (5 failures in a row
		// open it), and its rate threshold with a minimum of calls is
		// documented for time windows only. One more failure than the
		// window holds: its own count can never open the breaker.
		WithFailureThresholdRatio(uint(c.cfg.BreakerWindow)+1, uint(c.cfg.BreakerWindow)).
		OnSuccess(func(e failsafe.ExecutionEvent[*http.Response]) {
			if !errors.Is(e.LastError(), context.Canceled) { // says nothing about the host
				c.observe(b, false)
			}
		}).
		OnFailure(func(failsafe.ExecutionEvent[*http.Response]) { c.observe(b, true) }).
		WithDelay(c.cfg.BreakerOpenWait).
		// Half open: this many trial calls are let through; all must succeed
		// to close, the first failure reopens.
		WithSuccessThreshold(uint(c.cfg.BreakerHalfOpenTrials)).
		OnStateChanged(func(e circuitbreaker.StateChangedEvent) {
			// Called with failsafe-go's lock held: touch only our own state.
			b.mu.Lock()
			switch e.NewState {
			case circuitbreaker.OpenState:
				b.openedAt = c.now()
			case circuitbreaker.ClosedState:
				b.window, b.next = b.window[:0], 0 // a closed breaker starts a new window
			}
			b.mu.Unlock()
			if c.onState != nil {
				c.onState(key, stateName(e.OldState), stateName(e.NewState))
			}
		}).
		Build()
	c.breakers[key] = b
	return b
}

// observe records one call's outcome while closed, and opens the breaker
// once the window is full (BreakerWindow calls) and the failures in it
// reach the threshold. It runs before failsafe-go records the outcome,
// without its lock.
func (c *Client) observe(b *breaker, failed bool) {
	if !b.cb.IsClosed() {
		return // half open: the trial calls decide, in failsafe-go
	}
	b.mu.Lock()
	if len(b.window) < c.cfg.BreakerWindow {
		b.window = append(b.window, failed)
	} else {
		b.window[b.next] = failed
		b.next = (b.next + 1) % len(b.window)
	}
	n, fails := len(b.window), 0
	for _, f := range b.window {
		if f {
			fails++
		}
	}
	b.mu.Unlock()
	if n == c.cfg.BreakerWindow && uint(fails) >= c.cfg.breakerFailures() {
		b.cb.Open()
	}
}

// remaining is how long an open breaker still refuses calls, on the
// Client's clock; 0 when it is not open or its wait is over.
func (c *Client) remaining(b *breaker) time.Duration {
	if !b.cb.IsOpen() {
		return 0
	}
	b.mu.Lock()
	opened := b.openedAt
	b.mu.Unlock()
	return max(c.cfg.BreakerOpenWait-c.now().Sub(opened), 0)
}

// tick moves an open breaker whose wait is over (on the Client's clock) to
// half open, so that the next calls are trial calls. With the wall clock
// failsafe-go does the same by itself.
func (c *Client) tick(b *breaker) {
	if b.cb.IsOpen() && c.remaining(b) == 0 {
		b.cb.HalfOpen()
	}
}

// BreakerState returns StateClosed, StateOpen or StateHalfOpen for key: a
// host given as "host:port" (lower case, default port filled in, e.g.
// "api.example.com:443"), or the CallOptions.BreakerKey of the calls. A
// key never called is closed.
//
// An open breaker whose wait has elapsed is reported half open: the state
// switches lazily on the next call, but that call is a trial call.
func (c *Client) BreakerState(key string) string {
	b := c.lookup(key)
	if b == nil {
		return StateClosed
	}
	return c.effectiveState(b)
}

// BreakerRemaining returns how long the breaker of key keeps refusing
// calls: 0 unless it is open and its wait has not elapsed.
func (c *Client) BreakerRemaining(key string) time.Duration {
	b := c.lookup(key)
	if b == nil {
		return 0
	}
	return c.remaining(b)
}

// BreakerStates returns the state of every key called so far, for metrics.
func (c *Client) BreakerStates() map[string]string {
	c.mu.Lock()
	all := make(map[string]*breaker, len(c.breakers))
	for k, b := range c.breakers {
		all[k] = b
	}
	c.mu.Unlock()
	out := make(map[string]string, len(all))
	for k, b := range all {
		out[k] = c.effectiveState(b)
	}
	return out
}

func (c *Client) lookup(key string) *breaker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.breakers[key]; ok {
		return b
	}
	return c.breakers[strings.ToLower(key)]
}

func (c *Client) effectiveState(b *breaker) string {
	s := b.cb.State()
	if s == circuitbreaker.OpenState && c.remaining(b) == 0 {
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
