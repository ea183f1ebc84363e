package shed

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
	"time"
)

type connKey struct{}

// ConnContext is an http.Server's ConnContext: it keeps each request's
// connection in its context, so that the middleware can ask the kernel
// whether the client is still there and how long the request waited
// (see stateOf).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// connState is what the kernel knows of a request's connection.
type connState struct {
	// gone: the client has closed its side (its FIN arrived: CLOSE_WAIT)
	// or reset the connection.
	gone bool
	// waited is how long ago the last bytes of the request arrived: the
	// time it spent in the socket buffer, the accept backlog and the run
	// queue before reaching the middleware (to the kernel's clock tick,
	// a few ms); 0 when unknown.
	waited time.Duration
	// known: the kernel answered (waited is meaningful).
	known bool
}

// stateOf asks the kernel about the connection of the request with
// context ctx (see ConnContext); the zero connState when it cannot.
//
// net/http cancels a request's context when its connection closes, but
// only once a goroutine reading the connection in the background has
// run: a request that waited in a backlog while its client gave up is
// read whole (it was sent before the client hung up) and reaches the
// handler with its context still live. And nothing in net/http says how
// long a request waited before its goroutine ran: on a saturated core
// that wait, not the handler, is where an overload's queue forms.
func stateOf(ctx context.Context) connState {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return connState{}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return connState{}
	}
	var st connState
	_ = raw.Control(func(fd uintptr) { st = tcpState(fd) })
	return st
}
