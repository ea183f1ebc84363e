package shed

import (
	"bufio"
	"context"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"gatehouse/internal/httpx"
)

// refuse503 is a Refuse that writes a bare 503.
func refuse503(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Retry-After", RetryAfter)
	w.WriteHeader(http.StatusServiceUnavailable)
}

// TestMiddlewareRefusesBeyondTheLimit: with the limit held, a request is
// refused at once (503, Retry-After, counted) and never reaches the
// handler; a health check still gets through on the reserve, until the
// reserve is used up too.
func TestMiddlewareRefusesBeyondTheLimit(t *testing.T) {
	const listener = "test-limit"
	l := NewLimit(1, 1, time.Second)
	res := NewReserve(1)
	var ran atomic.Int64
	h := Middleware(Options{Listener: listener, Limit: l, Reserve: res, Refuse: refuse503,
		Reserved: func(r *http.Request) bool { return r.URL.Path == "/healthz" }})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
	}))
	counter := shedTotal.WithLabelValues(listener)
	if v := testutil.ToFloat64(counter); v != 0 {
		t.Fatalf("shed counter %v at start", v)
	}
	if !l.TryAcquire() {
		t.Fatal("limit not free at start")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/tickets", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || ran.Load() != 0 {
		t.Fatalf("beyond the limit: status %d, Retry-After %q, handler ran %d times", rec.Code, rec.Header().Get("Retry-After"), ran.Load())
	}
	if v := testutil.ToFloat64(counter); v != 1 {
		t.Fatalf("shed counter %v, want 1", v)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || ran.Load() != 1 {
		t.Fatalf("health check with the limit full: status %d, handler ran %d times", rec.Code, ran.Load())
	}
	res.tryAcquire() // the reserve used up as well
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("health check with limit and reserve full: status %d", rec.Code)
	}
	l.Release()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/tickets", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("after a release: status %d", rec.Code)
	}
}

// TestMiddlewareDoesNotStartAbandonedRequests: a request whose context
// the client's going away cancelled is answered 499 without running;
// one ended by a deadline is no client's doing and is not refused here.
func TestMiddlewareDoesNotStartAbandonedRequests(t *testing.T) {
	var ran atomic.Int64
	h := Middleware(Options{Listener: "test-gone", Limit: NewLimit(8, 8, time.Second), Refuse: refuse503})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx))
	if rec.Code != httpx.StatusClientClosed || ran.Load() != 0 {
		t.Fatalf("client gone: status %d, handler ran %d times", rec.Code, ran.Load())
	}
	dctx, dcancel := context.WithTimeoutCause(context.Background(), 0, httpx.ErrDeadline)
	defer dcancel()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(dctx))
	if ran.Load() != 1 {
		t.Fatalf("deadline passed: handler ran %d times, want 1 (the handler answers its 503)", ran.Load())
	}
}

// frozen keeps l from revising itself (for an hour), so that a test
// decides whether it is congested.
func frozen(l *Limit) *Limit {
	l.windowAt.Store(time.Now().Add(time.Hour).UnixNano())
	return l
}

// serveRaw serves h on loopback with ConnContext, as the app's servers do.
func serveRaw(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h, ConnContext: ConnContext}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// TestMiddlewareSeesTheClientHangUp: a request sent whole by a client
// that then closed its side reaches the server with its context live
// (net/http has not read the close yet); while the process is congested
// the kernel's TCP state says the client is gone, and the request is not
// started. The same request from a client still connected runs, and so
// does a half-closed client's when the process is not congested.
func TestMiddlewareSeesTheClientHangUp(t *testing.T) {
	var ran atomic.Int64
	release, blocked := make(chan struct{}), make(chan struct{})
	l := frozen(NewLimit(8, 8, time.Second))
	l.busy.Store(true)
	addr := serveRaw(t, Middleware(Options{Listener: "test-hangup", Limit: l, Refuse: refuse503})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/block" {
				close(blocked)
				<-release
			}
			ran.Add(1)
		})))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Hold the connection's goroutine in a first request, then queue a
	// second one behind it (HTTP/1.1 pipelining) and hang up: when the
	// second is read, its client is long gone.
	if _, err := c.Write([]byte("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-blocked
	if _, err := c.Write([]byte("GET /second HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	time.Sleep(50 * time.Millisecond) // the FIN arrives
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for ran.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := ran.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (the second request's client had gone)", n)
	}

	// Not congested: a half-closed client still gets its answer.
	l.busy.Store(false)
	c3, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := c3.Write([]byte("GET /half HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c3.(*net.TCPConn).CloseWrite()
	time.Sleep(50 * time.Millisecond)
	resp3, err := http.ReadResponse(bufio.NewReader(c3), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp3.Body.Close()
	if resp3.StatusCode != http.StatusOK || ran.Load() != 2 {
		t.Fatalf("half-closed client, not congested: status %d, handler ran %d times", resp3.StatusCode, ran.Load())
	}

	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("GET /second HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || ran.Load() != 3 {
		t.Fatalf("connected client: status %d, handler ran %d times", resp.StatusCode, ran.Load())
	}
}

// TestMiddlewareRefusesStaleRequests: while the process is congested and
// many requests wait at once, a request whose bytes arrived longer ago
// than the queue budget (it waited behind other work before it could be
// started) is refused and a fresh one served; while it is not congested,
// or congested with only a few requests waiting (a loaded machine, not
// an overload), a late request is served too.
func TestMiddlewareRefusesStaleRequests(t *testing.T) {
	var ran atomic.Int64
	l := frozen(NewLimit(8, 8, time.Second))
	shedding := Middleware(Options{Listener: "test-stale", Limit: l, QueueBudget: 30 * time.Millisecond, Refuse: refuse503})
	// In front of it, a stand-in for a busy process: requests to /slow
	// wait before the middleware sees them.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/slow") {
			time.Sleep(150 * time.Millisecond)
		}
		shedding(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Add(1) })).ServeHTTP(w, r)
	})
	addr := serveRaw(t, h)
	for _, c := range []struct {
		path      string
		congested bool
		waiting   float64
		want      int
	}{
		{"/slow", false, 100, http.StatusOK},
		{"/fresh", true, 100, http.StatusOK},
		{"/slow", true, 4, http.StatusOK},
		{"/slow", true, 100, http.StatusServiceUnavailable},
	} {
		l.busy.Store(c.congested)
		l.early.queue.Store(math.Float64bits(c.waiting))
		resp, err := http.Get("http://" + addr + c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s, congested %v: status %d, want %d", c.path, c.congested, resp.StatusCode, c.want)
		}
	}
	if ran.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3", ran.Load())
	}
}

// TestRefusalsAreSummarised: refusals write one WARN line a second with
// their count, not one each.
func TestRefusalsAreSummarised(t *testing.T) {
	var logs strings.Builder
	l := NewLimit(1, 1, time.Second)
	l.TryAcquire()
	h := Middleware(Options{Listener: "test-summary", Limit: l, Refuse: refuse503,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 50 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
	}
	if n := strings.Count(logs.String(), "load shedding"); n != 1 || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("50 refusals within a second logged %d lines: %s", n, logs.String())
	}
}

// TestKernelAskedOfASampleUnlessCongested: while the process is not
// congested, about one request in SampleEvery reads its wait from the
// kernel (a system call each); while it is, every request does.
func TestKernelAskedOfASampleUnlessCongested(t *testing.T) {
	l := frozen(NewLimit(64, 64, time.Second))
	h := Middleware(Options{Listener: "test-sample", Limit: l, Refuse: refuse503})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	addr := serveRaw(t, h)
	get := func(n int) {
		for range n {
			resp, err := http.Get("http://" + addr + "/x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	get(800)
	if n := l.early.waitN.Load(); n < 800/SampleEvery/2 || n > 800/SampleEvery*2 {
		t.Fatalf("not congested: %d of 800 requests read their wait, want about %d", n, 800/SampleEvery)
	}
	l.busy.Store(true)
	l.early.waitN.Store(0)
	get(100)
	if n := l.early.waitN.Load(); n != 100 {
		t.Fatalf("congested: %d of 100 requests read their wait, want every one", n)
	}
}
