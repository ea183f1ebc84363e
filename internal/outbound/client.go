// Package outbound is the HTTP client for every call gatehouse makes to
// external services (partner systems, webhook receivers). It enforces the
// limits of the specification: connect and read timeouts, a total and a
// per-host connection cap, retries for idempotent calls only, and a circuit
// breaker per host. Retry and breaker policies come from failsafe-go; the
// connection caps and timeouts are built on net/http.
//
// The package also signs outbound requests (Signer) and runs calls at most
// once per idempotency key (CallOnce).
package outbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"

	"gatehouse/internal/redact"
)

// Errors callers can test for with errors.Is.
var (
	// ErrCircuitOpen means the call was refused without contacting the host
	// because its circuit breaker is open.
	ErrCircuitOpen = errors.New("outbound: circuit breaker open")
	// ErrConnectTimeout means a connection could not be opened within the
	// connect timeout.
	ErrConnectTimeout = errors.New("outbound: connect timeout")
	// ErrReadTimeout means the response headers, or the next part of the
	// body, did not arrive within the read timeout.
	ErrReadTimeout = errors.New("outbound: read timeout")
	// ErrReplyCut ends the reads of a response body still arriving when
	// Config.ReplyTimeout ran out; what was read before it is whole.
	ErrReplyCut = errors.New("outbound: response body cut at the reply timeout")
)

// Breaker states as reported by BreakerState, named as in the specification.
const (
	StateClosed   = "CLOSED"
	StateOpen     = "OPEN"
	StateHalfOpen = "HALF_OPEN"
)

// CallOptions adjusts one call.
type CallOptions struct {
	// Idempotent marks a call as safe to repeat although its method is not,
	// e.g. a POST carrying an idempotency key the receiver honours. GET,
	// HEAD, OPTIONS, TRACE, PUT and DELETE are idempotent by method; POST
	// and PATCH are retried only when this is set.
	Idempotent bool
	// Signer, when set, signs every attempt afresh: a retry reusing the
	// first attempt's nonce would be refused as a replay by the receiver.
	Signer *Signer
	// BreakerKey names the circuit breaker the call passes and counts
	// against; empty means the destination's "host:port". Webhooks use one
	// breaker per partner callback endpoint, whatever its host.
	BreakerKey string
	// ClientCert, when set, is presented to the host if it asks for a
	// client certificate (mutual TLS); see ClientCert.
	ClientCert *ClientCert
}

// Option configures a Client.
type Option func(*Client)

// WithStateListener calls fn whenever the breaker of a key (a host, or a
// CallOptions.BreakerKey) changes state, for logs and metrics. States are
// StateClosed, StateOpen, StateHalfOpen. fn runs while the breaker is
// locked: it must not call back into the Client.
func WithStateListener(fn func(key, from, to string)) Option {
	return func(c *Client) { c.onState = fn }
}

// WithClock sets the clock an open breaker's wait is measured on (tests
// move it instead of sleeping). Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *Client) { c.now = now }
}

// Client makes outbound HTTP calls within the configured limits. It is safe
// for concurrent use; create one per process and share it, since the
// connection caps and breakers are per Client.
type Client struct {
	cfg       Config
	dialer    DialFunc
	limiter   *connLimiter
	transport *http.Transport
	http      *http.Client
	retry     retrypolicy.RetryPolicy[*http.Response]
	onState   func(key, from, to string)
	now       func() time.Time
	metered   bool     // WithMetrics
	targets   []string // WithMetrics

	mu       sync.Mutex
	breakers map[string]*breaker

	// certHTTP are the clients of calls with a client certificate, by
	// certificate (see ClientCert).
	certMu   sync.Mutex
	certHTTP map[string]*http.Client
}

// New returns a Client enforcing cfg, or the validation errors of cfg.
func New(cfg Config, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.RetryWaits = append([]time.Duration(nil), cfg.RetryWaits...)
	c := &Client{
		cfg:      cfg,
		dialer:   cfg.Dialer,
		limiter:  newConnLimiter(cfg.MaxConns),
		breakers: make(map[string]*breaker),
		certHTTP: make(map[string]*http.Client),
		now:      time.Now,
	}
	if c.dialer == nil {
		c.dialer = (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	for _, o := range opts {
		o(c)
	}
	c.transport = newTransport(cfg, c.dial)
	c.limiter.evictIdle = c.closeIdle
	c.http = &http.Client{
		Transport: c.transport,
		// Redirects are returned to the caller: following them would send
		// signed headers to wherever the remote points us.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c.retry = retrypolicy.NewBuilder[*http.Response]().
		HandleIf(retryable).
		AbortIf(func(_ *http.Response, err error) bool {
			return errors.Is(err, circuitbreaker.ErrOpen) || errors.Is(err, context.Canceled)
		}).
		WithMaxAttempts(cfg.RetryAttempts).
		WithDelayFunc(func(exec failsafe.ExecutionAttempt[*http.Response]) time.Duration {
			return cfg.retryWait(exec.Attempts())
		}).
		// The caller gets the last reply (e.g. the final 503 with its body)
		// rather than a generic "retries exceeded" error.
		ReturnLastFailure().
		// A reply that will be retried is never seen by the caller: release
		// its connection now.
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) { drain(e.LastResult()) }).
		Build()
	c.startMetrics()
	return c, nil
}

// Close releases idle connections and stops reporting metrics.
func (c *Client) Close() {
	meteredClients.remove(c)
	c.closeIdle()
}

// Do sends req and returns the reply. Replies of any status are returned
// as they are (redirects are not followed); the caller must close the body,
// and should read it promptly since the read timeout keeps running.
//
// Idempotent calls (see CallOptions) are retried after transport errors and
// 5xx or 429 replies, up to Config.RetryAttempts attempts in total, with the
// configured waits. Every attempt passes the breaker of the target host (or
// of CallOptions.BreakerKey); an open breaker fails the call with an error
// wrapping ErrCircuitOpen without dialing.
func (c *Client) Do(ctx context.Context, req *http.Request, opt CallOptions) (*http.Response, error) {
	if req.URL == nil || req.URL.Host == "" {
		return nil, errors.New("outbound: request URL has no host")
	}
	host := hostKey(req.URL)
	idempotent := opt.Idempotent || idempotentMethod(req.Method)
	retries := idempotent && c.cfg.RetryAttempts > 1
	if retries || opt.Signer != nil {
		if err := replayable(req); err != nil {
			return nil, err
		}
	}
	key := host
	if opt.BreakerKey != "" {
		key = opt.BreakerKey
	}
	b := c.breaker(key)
	c.tick(b)
	policies := []failsafe.Policy[*http.Response]{b.cb}
	if retries {
		policies = append([]failsafe.Policy[*http.Response]{c.retry}, policies...)
	}
	// What the attempts let through got, for an OpenError: the breaker may
	// open in the middle of a call's retries.
	var (
		mu   sync.Mutex
		open = &OpenError{Key: key}
	)
	resp, err := failsafe.With(policies...).WithContext(ctx).GetWithExecution(
		func(exec failsafe.Execution[*http.Response]) (*http.Response, error) {
			resp, err := c.attempt(exec.Context(), req, !exec.IsFirstAttempt(), opt)
			c.count(key, resp, err)
			mu.Lock()
			open.Attempts++
			open.LastStatus, open.LastErr = 0, err
			if resp != nil {
				open.LastStatus = resp.StatusCode
			}
			mu.Unlock()
			return resp, err
		})
	if errors.Is(err, circuitbreaker.ErrOpen) {
		c.countRejected(key)
		mu.Lock()
		defer mu.Unlock()
		return nil, open
	}
	return resp, err
}

// OpenError is the error of a call that an open circuit breaker refused;
// errors.Is(err, ErrCircuitOpen) holds. Attempts is how many attempts of
// this call were sent before the breaker opened: 0 means it was open when
// the call began and nothing was sent. LastStatus is the status of the
// last attempt's reply, or LastErr why it got none.
type OpenError struct {
	Key        string
	Attempts   int
	LastStatus int
	LastErr    error
}

func (e *OpenError) Error() string {
	if e.Attempts == 0 {
		return fmt.Sprintf("outbound: %s: %s", e.Key, ErrCircuitOpen)
	}
	return fmt.Sprintf("outbound: %s: %s after %d attempt(s)", e.Key, ErrCircuitOpen, e.Attempts)
}

// Unwrap makes errors.Is(err, ErrCircuitOpen) hold.
func (e *OpenError) Unwrap() error { return ErrCircuitOpen }

// attempt sends one copy of req. The attempt's context outlives this call:
// it is canceled when the body is closed or the read timeout fires.
func (c *Client) attempt(ctx context.Context, req *http.Request, retry bool, opt CallOptions) (*http.Response, error) {
	actx, cancel := context.WithCancelCause(ctx)
	var replyOver *atomic.Bool
	if c.cfg.ReplyTimeout > 0 {
		replyOver = new(atomic.Bool)
		actx = c.replyDeadline(actx, cancel, replyOver)
	}
	r := req.Clone(context.WithValue(actx, requestCtxKey{}, actx))
	if retry && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			cancel(nil)
			return nil, fmt.Errorf("outbound: replaying request body: %w", err)
		}
		r.Body = body
	}
	if opt.Signer != nil {
		if err := opt.Signer.Sign(r); err != nil {
			cancel(nil)
			return nil, err
		}
	}
	resp, err := c.httpFor(opt.ClientCert).Do(r)
	if err != nil {
		// net/http's error names the whole URL; whatever it reaches (a
		// log, a delivery's lastError, a span) shows its scheme and host.
		err = redact.Error(err)
		cancel(nil)
		if replyOver != nil && replyOver.Load() && ctx.Err() == nil {
			// Not wrapping err: a context cancellation is not counted
			// against the host, a reply that never came is.
			return nil, fmt.Errorf("%w: no response headers within %s of the connection", ErrReadTimeout, c.cfg.ReplyTimeout)
		}
		if ctx.Err() == nil && !errors.Is(err, ErrConnectTimeout) && isTimeout(err) {
			// The transport's ResponseHeaderTimeout fired.
			return nil, fmt.Errorf("%w (%s): %w", ErrReadTimeout, c.cfg.ReadTimeout, err)
		}
		return nil, err
	}
	tb := newTimedBody(resp.Body, c.cfg.ReadTimeout, cancel)
	tb.replyOver = replyOver
	resp.Body = tb
	return resp, nil
}

// replyDeadline returns ctx with a trace that, once the attempt has its
// connection, cancels the attempt (cancel) after Config.ReplyTimeout and
// sets over first.
func (c *Client) replyDeadline(ctx context.Context, cancel context.CancelCauseFunc, over *atomic.Bool) context.Context {
	var once sync.Once
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			once.Do(func() {
				t := time.AfterFunc(c.cfg.ReplyTimeout, func() {
					over.Store(true)
					cancel(ErrReplyCut)
				})
				context.AfterFunc(ctx, func() { t.Stop() })
			})
		},
	})
}

// retryable reports whether an attempt's outcome is worth another attempt.
func retryable(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
}

// breakerFailure reports whether an outcome counts against the host. A 429
// does not: the host is healthy and asking us to slow down. A call canceled
// by our caller says nothing about the host either.
func breakerFailure(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled)
	}
	return resp.StatusCode >= 500
}

func idempotentMethod(m string) bool {
	switch m {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// replayable makes sure req.GetBody can produce the body again, buffering
// the body in memory when the caller's request cannot replay it.
func replayable(req *http.Request) error {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		return nil
	}
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return fmt.Errorf("outbound: reading request body: %w", err)
	}
	req.ContentLength = int64(len(b))
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return nil
}

// hostKey names the breaker of a URL's destination: lower-case host and
// port, with the scheme's default port filled in, as the transport dials it.
func hostKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
