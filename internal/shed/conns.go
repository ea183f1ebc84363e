package shed

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var connsRefusedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "gatehouse_http_connections_refused_total",
	Help: "Connections a listener refused because it had its most open connections at once (GATEHOUSE_SHED_MAX_CONNECTIONS): answered 503 and closed, by listener; every listener's series exists at 0 from the start.",
}, []string{"listener"})

var connsOpen = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Name: "gatehouse_http_connections_open",
	Help: "Connections a listener has open now (idle keep-alive ones included), by listener.",
}, []string{"listener"})

// ConnCap bounds a listener's open connections. Each connection costs the
// process memory whether or not it carries a request (a goroutine, read
// buffers, the kernel's socket buffers), and a client that opens a new
// connection whenever its others are slow — what an HTTP client pool does
// by default when a server falls behind — would otherwise grow the
// process by thousands of them during an overload. Beyond the cap a new
// connection is answered at once with a 503 and closed, and the idle
// keep-alive connections are closed (OnFull) so that clients with work
// get the room.
type ConnCap struct {
	// Max is the most connections open at once.
	Max int
	// Listener names the listener in the metrics.
	Listener string
	// Refusal is what a refused connection is sent before it is closed
	// (a whole HTTP/1.1 response); nil: nothing (a TLS listener, whose
	// client expects a handshake).
	Refusal []byte
	// OnFull is called, at most once a second, when a connection is
	// refused (http.Server's idle connections are closed by it).
	OnFull func()
}

// ConnectionMetrics makes the connection metrics of listeners exist at 0
// from the process's start (an alert on a series that does not exist yet
// cannot fire).
func ConnectionMetrics(listeners ...string) {
	for _, l := range listeners {
		connsRefusedTotal.WithLabelValues(l)
		connsOpen.WithLabelValues(l)
	}
}

// Wrap returns ln bounded by the cap; a Max of 0 or less returns ln.
func (cc ConnCap) Wrap(ln net.Listener) net.Listener {
	refused := connsRefusedTotal.WithLabelValues(cc.Listener) // exists at 0 from the start
	open := connsOpen.WithLabelValues(cc.Listener)
	if cc.Max <= 0 {
		return ln
	}
	return &capListener{Listener: ln, cc: cc, refused: refused, gauge: open}
}

type capListener struct {
	net.Listener
	cc      ConnCap
	open    atomic.Int64
	refused prometheus.Counter
	gauge   prometheus.Gauge
	fullAt  atomic.Int64 // UnixNano of the last OnFull
	// refusing counts the refused connections being answered now.
	refusing atomic.Int64
}

// maxRefusing bounds the refused connections answered at once (each
// holds a goroutine for at most refuseDrain).
const maxRefusing = 256

// refuseDrain bounds how long a refused connection's request is read
// (and discarded) after the answer, so that closing it does not reset
// the connection before the client has read the 503.
const refuseDrain = 200 * time.Millisecond

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= int64(l.cc.Max) {
			l.gauge.Inc()
			return &cappedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refused.Inc()
		l.full()
		if l.refusing.Add(1) > maxRefusing {
			// A flood: answering costs a goroutine for up to refuseDrain
			// each; past maxRefusing at once the connection is closed
			// unanswered, so the bound holds the memory it is for.
			l.refusing.Add(-1)
			c.Close()
			continue
		}
		go func() {
			defer l.refusing.Add(-1)
			l.refuse(c)
		}()
	}
}

func (l *capListener) full() {
	if l.cc.OnFull == nil {
		return
	}
	now := time.Now().UnixNano()
	last := l.fullAt.Load()
	if now-last < int64(time.Second) || !l.fullAt.CompareAndSwap(last, now) {
		return
	}
	go l.cc.OnFull()
}

// refuse answers a connection beyond the cap and closes it: the answer,
// then the end of the sending side, then whatever the client sent read
// and dropped for a moment (closing a socket with unread data resets it,
// and the reset may reach the client before it has read the answer).
func (l *capListener) refuse(c net.Conn) {
	defer c.Close()
	deadline := time.Now().Add(refuseDrain)
	_ = c.SetDeadline(deadline)
	if l.cc.Refusal == nil {
		return
	}
	if _, err := c.Write(l.cc.Refusal); err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// cappedConn gives its place back when closed (once, however often Close
// is called).
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.gauge.Dec()
	})
	return c.Conn.Close()
}

// SyscallConn reaches the socket (the middleware asks the kernel about
// each request's connection: stateOf).
func (c *cappedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("not a socket")
}

// CloseWrite half-closes a TCP connection (net/http's graceful close).
func (c *cappedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
