package config

import (
	"errors"
	"time"
)

// Shed is the load shedding of each listener (internal/shed): an adaptive
// concurrency limit that refuses, at once and before any database or
// key-value work, what the process cannot serve in time.
type Shed struct {
	Enabled bool `flag:"shed" default:"true" usage:"refuse requests beyond an adaptive concurrency limit with 503 (load shedding)" doc:"load shedding on each listener: requests beyond an adaptive concurrency limit are refused at once with 503 (partner API: 503/6000; GraphQL: extensions.code OVERLOADED) and Retry-After, before any database or Redis work ([how it works](operations.md#load-shedding)); false takes on every request and every connection (GATEHOUSE_SHED_MAX_CONNECTIONS too)"`
	// MinConcurrency is the floor of the limit: what closed-loop clients
	// may always have in flight at once.
	MinConcurrency int           `flag:"shed-min-concurrency" default:"256" usage:"the adaptive limit's floor: requests a listener admits at once however busy the process" doc:"the adaptive limit's floor and starting point: requests a listener admits at once however busy the process"`
	MaxConcurrency int           `flag:"shed-max-concurrency" default:"1024" usage:"the adaptive limit's ceiling" doc:"the adaptive limit's ceiling: requests a listener admits at once at most, however idle the process"`
	QueueBudget    time.Duration `flag:"shed-queue-budget" default:"50ms" usage:"refuse a request that waited longer than this before it could be started; the limit holds scheduling delays to a fifth of it" doc:"a request that waited longer than this in the kernel's buffers and the run queue before it could be started (TCP_INFO, Linux) is refused; the adaptive limit shrinks when the 90th percentile of the process's scheduling delay over 50 ms passes a fifth of it"`
	MaxConnections int           `flag:"shed-max-connections" default:"4096" usage:"the most connections a listener keeps open at once (0: no bound); beyond it a new connection is answered 503 and closed" doc:"the most connections each listener keeps open at once, idle keep-alive ones included (0: no bound): beyond it a new connection is answered 503 with Retry-After and closed, and the idle keep-alive connections are closed so that clients with requests get the room; each open connection costs the process some 20 KiB whether or not it carries a request (measured: 5,000 keep-alive connections, 100 MiB)"`
	Reserve        int           `flag:"shed-reserve" default:"8" usage:"requests to /healthz and /readyz admitted beyond a full limit" doc:"requests to /healthz, /readyz (and, on the admin listener, /metrics) admitted at once beyond a full limit, so that load balancers and operators still get answers during an overload"`
}

// Validate checks the bounds.
func (s *Shed) Validate() error {
	var errs []error
	if s.MinConcurrency < 1 || s.MinConcurrency > s.MaxConcurrency {
		errs = append(errs, invalidf(s, &s.MinConcurrency, "must be at least 1 and at most %s", envOf(s, &s.MaxConcurrency)))
	}
	if s.MaxConcurrency > 1_000_000 {
		errs = append(errs, invalidf(s, &s.MaxConcurrency, "must be at most 1000000"))
	}
	if s.QueueBudget < time.Millisecond || s.QueueBudget > 10*time.Second {
		errs = append(errs, invalidf(s, &s.QueueBudget, "must be between 1ms and 10s"))
	}
	if s.MaxConnections < 0 || s.MaxConnections > 10_000_000 {
		errs = append(errs, invalidf(s, &s.MaxConnections, "must be between 0 (no bound) and 10000000"))
	}
	if s.Reserve < 0 || s.Reserve > 10_000 {
		errs = append(errs, invalidf(s, &s.Reserve, "must be between 0 and 10000"))
	}
	return errors.Join(errs...)
}
