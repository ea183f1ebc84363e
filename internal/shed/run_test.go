package shed

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/httpx"
)

// goroutineID is the id the runtime prints in the running goroutine's
// stack header ("goroutine 42 [running]:").
func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := strings.Fields(string(b))
	return f[1]
}

// TestAdmittedRequestsRunOnPooledGoroutines: requests admitted by the
// limit run on a goroutine of the pool, the same one request after
// request, whichever goroutine (connection) they came in on — so its
// grown stack is kept.
func TestAdmittedRequestsRunOnPooledGoroutines(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	h := Middleware(Options{Listener: "test-pool", Limit: NewLimit(4, 4, time.Second), Refuse: refuse503})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		seen = append(seen, goroutineID())
		mu.Unlock()
	}))
	callers := map[string]bool{}
	const requests = 10
	for range requests {
		done := make(chan struct{})
		go func() { // a connection's goroutine, a new one each time
			defer close(done)
			callers[goroutineID()] = true
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/tickets", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("status %d", rec.Code)
			}
		}()
		<-done
		time.Sleep(20 * time.Millisecond) // the worker back in the pool (after it answered)
	}
	distinct := map[string]bool{}
	for _, id := range seen {
		if callers[id] {
			t.Fatalf("the handler ran on its caller's goroutine %s", id)
		}
		distinct[id] = true
	}
	// One goroutine for all, but a worker that a loaded machine has not
	// yet put back into the pool makes the pool start another.
	if len(seen) != requests || len(distinct) > requests/2 {
		t.Fatalf("handler goroutines %v: want the pool's few for the %d requests", seen, requests)
	}
}

// TestPooledHandlerPanics: a handler's panic on its pooled goroutine is
// raised again on the caller's — so the request is answered 500 by
// Recoverer, which logs the panic with the handler's own stack — and
// http.ErrAbortHandler is raised again as is (net/http aborts the
// response quietly); the pool goes on serving.
func TestPooledHandlerPanics(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	handler := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/boom":
			panicInHandler()
		case "/abort":
			panic(http.ErrAbortHandler)
		}
	}
	h := httpx.Recoverer(log)(Middleware(Options{Listener: "test-pool-panic", Limit: NewLimit(4, 4, time.Second), Refuse: refuse503})(http.HandlerFunc(handler)))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("panicking handler: status %d, want 500", rec.Code)
	}
	if s := logs.String(); !strings.Contains(s, "boom in the handler") || !strings.Contains(s, "panicInHandler") {
		t.Fatalf("the log lacks the panic or the handler's stack: %s", s)
	}

	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Fatalf("ErrAbortHandler came back as %v", v)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/abort", nil))
		t.Fatal("ErrAbortHandler did not reach the caller")
	}()

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ok", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("after the panics: status %d", rec.Code)
	}
}

func panicInHandler() { panic("boom in the handler") }

// TestPooledHandlerGoexit: a handler that calls runtime.Goexit ends its
// caller's goroutine as it would have without the pool, instead of
// leaving it waiting for ever.
func TestPooledHandlerGoexit(t *testing.T) {
	h := Middleware(Options{Listener: "test-pool-goexit", Limit: NewLimit(4, 4, time.Second), Refuse: refuse503})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		runtime.Goexit()
	}))
	returned := make(chan bool, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
		returned <- true
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the caller still waits after the handler's Goexit")
	}
	if len(returned) != 0 {
		t.Fatal("ServeHTTP returned normally after the handler's Goexit")
	}
}
