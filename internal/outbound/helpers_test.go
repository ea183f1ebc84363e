package outbound

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testConfig keeps the production structure with waits small enough for tests.
func testConfig() Config {
	c := DefaultConfig()
	c.ConnectTimeout = time.Second
	c.ReadTimeout = 2 * time.Second
	c.RetryWaits = []time.Duration{time.Millisecond, 2 * time.Millisecond}
	c.BreakerOpenWait = 50 * time.Millisecond
	return c
}

func newClient(t *testing.T, cfg Config, opts ...Option) *Client {
	t.Helper()
	c, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// gauge tracks a current value and the highest value it reached.
type gauge struct {
	mu       sync.Mutex
	cur, max int
}

func (g *gauge) add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cur += d
	g.max = max(g.max, g.cur)
}

func (g *gauge) get() (cur, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur, g.max
}

// countingServer is an httptest server on 127.0.0.1 that counts the
// connections open at once, as seen from the server side, both for itself
// and (through total) summed with other servers sharing the gauge.
type countingServer struct {
	*httptest.Server
	conns    gauge
	inFlight gauge
	hits     atomic.Int64
}

func newCountingServer(t *testing.T, total *gauge, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.inFlight.add(1)
		defer s.inFlight.add(-1)
		h(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		d := 0
		switch st {
		case http.StateNew:
			d = 1
		case http.StateClosed, http.StateHijacked:
			d = -1
		}
		if d != 0 {
			s.conns.add(d)
			if total != nil {
				total.add(d)
			}
		}
	}
	srv.Start()
	s.Server = srv
	t.Cleanup(srv.Close)
	return s
}

// gate blocks handlers until opened; it opens itself at test cleanup so
// that httptest.Server.Close (which waits for handlers) cannot hang.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) wait(r *http.Request) {
	select {
	case <-g.ch:
	case <-r.Context().Done():
	}
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// countingDialer counts dials made through the default net.Dialer.
func countingDialer(n *atomic.Int64) DialFunc {
	d := &net.Dialer{}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return d.DialContext(ctx, network, addr)
	}
}

func get(t *testing.T, c *Client, url string, opt CallOptions) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Do(context.Background(), req, opt)
}
