package outbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// requestCtxKey carries the context of the request that caused a dial. The
// transport detaches dials from request cancellation (a finished dial may
// serve a later request), so this is the only way a dial waiting for a free
// connection slot can notice that nobody wants it any more.
type requestCtxKey struct{}

// connLimiter caps the connections open at once over all hosts;
// http.Transport only has a per-host cap.
type connLimiter struct {
	slots chan struct{}
	// evictIdle closes the transport's idle connections. Idle keep-alive
	// connections hold slots too; without evicting them a new host could
	// wait for a whole idle timeout while nothing is actually in use.
	evictIdle func()
	waiting   atomic.Int64 // dials blocked on a slot (metrics)
}

func newConnLimiter(n int) *connLimiter {
	return &connLimiter{slots: make(chan struct{}, n)}
}

func (l *connLimiter) acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	if l.evictIdle != nil {
		l.evictIdle()
	}
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	var requestDone <-chan struct{}
	if rc, ok := ctx.Value(requestCtxKey{}).(context.Context); ok {
		requestDone = rc.Done()
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("outbound: waiting for a free connection: %w", context.Cause(ctx))
	case <-requestDone:
		return errors.New("outbound: waiting for a free connection: request canceled")
	}
}

func (l *connLimiter) release() { <-l.slots }

// open reports the number of connections currently holding a slot (metrics).
func (l *connLimiter) open() int { return len(l.slots) }

// limitedConn gives its slot back when closed, whoever closes it (the
// transport after an error, an idle timeout, or CloseIdleConnections).
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// dial takes a connection slot, then opens the connection within the
// connect timeout. Waiting for a slot is not part of the connect timeout.
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := c.limiter.acquire(ctx); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	conn, err := c.dialer(dctx, network, addr)
	if err != nil {
		c.limiter.release()
		if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || isTimeout(err)) {
			return nil, fmt.Errorf("%w (%s) dialing %s: %w", ErrConnectTimeout, c.cfg.ConnectTimeout, addr, err)
		}
		return nil, err
	}
	return &limitedConn{Conn: conn, release: sync.OnceFunc(c.limiter.release)}, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func newTransport(cfg Config, dial DialFunc) *http.Transport {
	tlsCfg := &tls.Config{}
	if cfg.TLS != nil {
		tlsCfg = cfg.TLS.Clone()
	}
	return &http.Transport{
		TLSClientConfig: tlsCfg,
		// No proxy here on purpose: a proxy would make the dialer (and with
		// it the connection caps and the webhook SSRF guard) see the
		// proxy's address instead of the real destination. A proxy is a
		// dialer instead (ProxyDialer), which sees both.
		Proxy:                 nil,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   cfg.ConnectTimeout,
		ResponseHeaderTimeout: cfg.ReadTimeout,
		ExpectContinueTimeout: time.Second,
		MaxConnsPerHost:       cfg.MaxConnsPerHost,
		MaxIdleConns:          cfg.MaxConns,
		MaxIdleConnsPerHost:   cfg.MaxConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
	}
}

// timedBody enforces the read timeout while the response body is read: each
// read must complete within ReadTimeout of the headers or of the previous
// read, else the attempt's context is canceled and reads fail with
// ErrReadTimeout. The clock also runs while the caller is not reading, so a
// body must be consumed promptly (outbound replies are small JSON documents).
type timedBody struct {
	body    io.ReadCloser
	timeout time.Duration
	timer   *time.Timer
	cancel  context.CancelCauseFunc
	expired atomic.Bool
	// replyOver is set when Config.ReplyTimeout ran out (nil without one).
	replyOver *atomic.Bool
}

func newTimedBody(body io.ReadCloser, timeout time.Duration, cancel context.CancelCauseFunc) *timedBody {
	b := &timedBody{body: body, timeout: timeout, cancel: cancel}
	b.timer = time.AfterFunc(timeout, func() {
		b.expired.Store(true)
		cancel(ErrReadTimeout)
	})
	return b
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && err != io.EOF && b.replyOver != nil && b.replyOver.Load() {
		return n, ErrReplyCut
	}
	if b.expired.Load() {
		return n, fmt.Errorf("outbound: reading response body: %w (%s)", ErrReadTimeout, b.timeout)
	}
	if err == nil {
		b.timer.Reset(b.timeout)
	} else {
		b.timer.Stop()
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.timer.Stop()
	err := b.body.Close()
	b.cancel(nil)
	return err
}

// drain reads a little of a discarded body before closing it so that the
// connection can go back to the pool instead of being torn down.
func drain(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}
