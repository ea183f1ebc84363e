package shed

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/panjf2000/ants/v2"

	"gatehouse/internal/httpx"
)

// Admitted requests run on pooled goroutines (ants, most recently used
// first), not on their connection's. A connection's goroutine lives as
// long as the connection, and with many connections each serves a request
// only now and then: at every garbage collection the runtime halves the
// stack of a goroutine that uses little of it (an idle connection's), and
// the next request through the database grows it back, copying it up to
// four times — on one core with 1,024 keep-alive clients 17 µs of a
// 230 µs ticket page (a profile against 16 clients). A pooled goroutine
// serves request after request with its stack grown; a burst's extra ones
// leave after workerIdle without work.
const workerIdle = time.Second

// workers is the process's pool of request goroutines, started with the
// first listener that sheds (unbounded: the limits bound what is admitted).
var workers = sync.OnceValue(func() *ants.Pool {
	p, err := ants.NewPool(-1, ants.WithExpiryDuration(workerIdle))
	if err != nil {
		panic(err) // only for invalid options
	}
	return p
})

// goexited marks a handler that called runtime.Goexit on its worker.
type goexited struct{}

// serve runs next on a pooled goroutine and waits for it to finish, as if
// on the caller's: a panic is re-raised here (http.ErrAbortHandler as
// is, any other as an *httpx.HandlerPanic carrying the handler's stack),
// and runtime.Goexit ends the caller too.
func serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	done := make(chan any, 1)
	err := workers().Submit(func() {
		returned := false
		defer func() {
			if returned {
				done <- nil
				return
			}
			switch v := recover(); {
			case v == nil: // runtime.Goexit: recover sees nothing
				done <- goexited{}
			case v == http.ErrAbortHandler:
				done <- v
			default:
				done <- &httpx.HandlerPanic{Value: v, Stack: debug.Stack()}
			}
		}()
		next.ServeHTTP(w, r)
		returned = true
	})
	if err != nil { // the pool is closed: never, but serve anyway
		next.ServeHTTP(w, r)
		return
	}
	switch v := <-done; v.(type) {
	case nil:
	case goexited:
		runtime.Goexit()
	default:
		panic(v)
	}
}
