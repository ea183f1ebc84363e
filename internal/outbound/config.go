package outbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"time"
)

// DialFunc opens a network connection; it has the shape of
// (*net.Dialer).DialContext so a guarded dialer (see internal/webhook) can be
// plugged in directly.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Config holds the limits of outbound calls. DefaultConfig gives the values
// of the specification ("Limits": outbound calls to external services).
type Config struct {
	// ConnectTimeout bounds opening a connection (TCP connect and TLS
	// handshake). It does not include waiting for a free connection slot.
	ConnectTimeout time.Duration
	// ReadTimeout bounds the wait for the response headers after the request
	// was written, and then each wait for more of the response body.
	ReadTimeout time.Duration
	// ReplyTimeout, when positive, bounds everything after the connection
	// is obtained: writing the request, the response headers and reading
	// the body together, so a reply dripped a byte at a time cannot hold
	// an attempt longer (ReadTimeout alone restarts with every read).
	// Headers not complete by then fail the attempt with ErrReadTimeout;
	// a body still arriving is cut: its reads end with ErrReplyCut. Zero:
	// no such bound.
	ReplyTimeout time.Duration
	// MaxConns caps the connections open at once over all hosts.
	MaxConns int
	// MaxConnsPerHost caps the connections open at once to one host:port.
	MaxConnsPerHost int

	// RetryAttempts is the number of attempts in total (1 = no retry).
	// Only idempotent calls are retried.
	RetryAttempts int
	// RetryWaits are the waits before the 2nd, 3rd, … attempt; when there are
	// fewer waits than retries the last one is repeated.
	RetryWaits []time.Duration

	// BreakerWindow is the number of most recent calls per host the failure
	// ratio is computed over. The ratio is judged only over a full window:
	// the breaker cannot open before this many calls were made.
	BreakerWindow int
	// BreakerFailureRatio opens the breaker once this share of the window
	// failed (0.5 of 10 = 5 failures among the last 10 calls).
	BreakerFailureRatio float64
	// BreakerOpenWait is how long an open breaker rejects calls before it lets
	// trial calls through (half open).
	BreakerOpenWait time.Duration
	// BreakerHalfOpenTrials is the number of trial calls in the half-open
	// state; all must succeed to close the breaker, one failure reopens it.
	BreakerHalfOpenTrials int
	// Dialer opens connections; nil means a net.Dialer. The connect timeout
	// and the connection caps are applied around it either way.
	Dialer DialFunc
	// TLS is the TLS configuration calls start from (the root CAs that
	// verify hosts, say); nil: Go's defaults and the system's roots. It is
	// copied; client certificates are per call (CallOptions.ClientCert).
	TLS *tls.Config
}

// DefaultConfig returns the limits of the specification: connect 3 s, read
// 5 s, 200 connections in total and 50 per host, 3 attempts with waits of 1 s
// and 2 s, and a breaker over 10 calls opening at 50 % failures for 30 s with
// 5 trial calls.
func DefaultConfig() Config {
	return Config{
		ConnectTimeout:        3 * time.Second,
		ReadTimeout:           5 * time.Second,
		MaxConns:              200,
		MaxConnsPerHost:       50,
		RetryAttempts:         3,
		RetryWaits:            []time.Duration{1 * time.Second, 2 * time.Second},
		BreakerWindow:         10,
		BreakerFailureRatio:   0.5,
		BreakerOpenWait:       30 * time.Second,
		BreakerHalfOpenTrials: 5,
	}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("outbound: %s must be positive, got %s", name, d))
		}
	}
	positive("connect timeout", c.ConnectTimeout)
	positive("read timeout", c.ReadTimeout)
	if c.ReplyTimeout < 0 {
		errs = append(errs, fmt.Errorf("outbound: reply timeout must not be negative, got %s", c.ReplyTimeout))
	}
	positive("breaker open wait", c.BreakerOpenWait)
	if c.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("outbound: max connections must be at least 1, got %d", c.MaxConns))
	}
	if c.MaxConnsPerHost < 1 || c.MaxConnsPerHost > c.MaxConns {
		errs = append(errs, fmt.Errorf("outbound: max connections per host must be between 1 and max connections (%d), got %d", c.MaxConns, c.MaxConnsPerHost))
	}
	if c.RetryAttempts < 1 {
		errs = append(errs, fmt.Errorf("outbound: retry attempts must be at least 1, got %d", c.RetryAttempts))
	}
	if c.RetryAttempts > 1 && len(c.RetryWaits) == 0 {
		errs = append(errs, errors.New("outbound: retry waits must be given when retry attempts exceed 1"))
	}
	for i, w := range c.RetryWaits {
		if w < 0 {
			errs = append(errs, fmt.Errorf("outbound: retry wait %d is negative: %s", i+1, w))
		}
	}
	if c.BreakerWindow < 1 {
		errs = append(errs, fmt.Errorf("outbound: breaker window must be at least 1, got %d", c.BreakerWindow))
	}
	if !(c.BreakerFailureRatio > 0 && c.BreakerFailureRatio <= 1) {
		errs = append(errs, fmt.Errorf("outbound: breaker failure ratio must be in (0, 1], got %v", c.BreakerFailureRatio))
	}
	if c.BreakerHalfOpenTrials < 1 {
		errs = append(errs, fmt.Errorf("outbound: breaker half-open trials must be at least 1, got %d", c.BreakerHalfOpenTrials))
	}
	return errors.Join(errs...)
}

// breakerFailures is the number of failures within the window that opens the
// breaker. Rounding up keeps "50 % of 10" at 5 and never lets a ratio round
// down to zero failures.
func (c Config) breakerFailures() uint {
	return uint(max(1, math.Ceil(c.BreakerFailureRatio*float64(c.BreakerWindow)-1e-9)))
}

// retryWait is the wait before attempt n+1, after n failed attempts (n ≥ 1).
func (c Config) retryWait(failed int) time.Duration {
	if len(c.RetryWaits) == 0 {
		return 0
	}
	return c.RetryWaits[min(failed, len(c.RetryWaits))-1]
}
