package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fireGETs sends n concurrent GETs to url and returns a function that waits
// for them and reports any failure.
func fireGETs(t *testing.T, c *Client, url string, n int) func() {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			resp, err := c.Do(context.Background(), req, CallOptions{})
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	return func() {
		t.Helper()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("request failed: %v", err)
		}
	}
}

func TestPerHostConnectionCap(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConns, cfg.MaxConnsPerHost = 100, 3
	cfg.ConnectTimeout, cfg.ReadTimeout = time.Minute, time.Minute // handlers are held on purpose
	cfg.RetryAttempts = 1
	c := newClient(t, cfg)
	g := newGate(t)
	srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) { g.wait(r) })

	done := fireGETs(t, c, srv.URL, 10)
	waitFor(t, "3 requests in flight", func() bool { cur, _ := srv.inFlight.get(); return cur >= 3 })
	g.open()
	done()

	if _, peak := srv.conns.get(); peak != 3 {
		t.Errorf("peak connections at the server = %d, want 3", peak)
	}
	if _, peak := srv.inFlight.get(); peak != 3 {
		t.Errorf("peak requests in flight = %d, want 3", peak)
	}
}

// testTotalCap sends perServer requests to each of servers hosts, all
// blocked until the total cap is reached and the surplus dials are seen
// waiting for a slot; a client without the total cap would exceed it and
// never show waiters, so the test cannot pass by luck.
func testTotalCap(t *testing.T, cfg Config, servers, perServer int) {
	// Handlers are held until the cap is reached, which on a loaded machine
	// can take longer than the usual timeouts. A timed-out dial would also
	// skew the server-side count (the server may still hold the accepted
	// connection when the client dials again), and a retry would hide it.
	cfg.ConnectTimeout, cfg.ReadTimeout = time.Minute, time.Minute
	cfg.RetryAttempts = 1
	c := newClient(t, cfg)
	g := newGate(t)
	var total gauge
	var srvs []*countingServer
	for range servers {
		srvs = append(srvs, newCountingServer(t, &total, func(w http.ResponseWriter, r *http.Request) { g.wait(r) }))
	}
	var dones []func()
	for _, s := range srvs {
		dones = append(dones, fireGETs(t, c, s.URL, perServer))
	}
	wantWaiting := int64(servers*cfg.MaxConnsPerHost - cfg.MaxConns)
	waitFor(t, "total cap reached with dials waiting", func() bool {
		cur, _ := total.get()
		return cur == cfg.MaxConns && c.limiter.waiting.Load() == wantWaiting
	})
	// The peak is taken before the handlers are released: afterwards the
	// client may close a connection and open another before the server has
	// noticed the close, which a server-side count would see as one too many.
	_, peak := total.get()
	var hostPeaks []int
	for _, s := range srvs {
		_, p := s.conns.get()
		hostPeaks = append(hostPeaks, p)
	}
	g.open()
	for _, d := range dones {
		d()
	}

	if peak != cfg.MaxConns {
		t.Errorf("peak connections over all servers = %d, want %d", peak, cfg.MaxConns)
	}
	if n := c.limiter.open(); n > cfg.MaxConns {
		t.Errorf("connections holding a slot = %d, over the cap %d", n, cfg.MaxConns)
	}
	for i, p := range hostPeaks {
		if p > cfg.MaxConnsPerHost {
			t.Errorf("server %d: peak connections = %d, over the per-host cap %d", i, p, cfg.MaxConnsPerHost)
		}
	}
	// A dial the transport started for a request that an idle connection
	// then served is detached from that request; it gives up once it sees
	// the request ended, which its goroutine may not have done yet.
	waitFor(t, "no dial left waiting for a slot after all requests ended", func() bool {
		return c.limiter.waiting.Load() == 0
	})
}

func TestTotalConnectionCap(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConns, cfg.MaxConnsPerHost = 5, 3
	testTotalCap(t, cfg, 2, 6)
}

func TestConnectionCapsAtDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 200 connections")
	}
	cfg := testConfig()
	if cfg.MaxConns != 200 || cfg.MaxConnsPerHost != 50 {
		t.Fatalf("defaults changed: %d in total, %d per host", cfg.MaxConns, cfg.MaxConnsPerHost)
	}
	// 5 hosts × 50 per host = 250 possible connections, capped at 200.
	testTotalCap(t, cfg, 5, 60)
}

// Idle keep-alive connections hold slots; a new host must not wait for
// them to time out.
func TestTotalCapEvictsIdleConnections(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConns, cfg.MaxConnsPerHost = 1, 1
	c := newClient(t, cfg)
	ok := func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }
	a, b := newCountingServer(t, nil, ok), newCountingServer(t, nil, ok)

	for _, u := range []string{a.URL, b.URL, a.URL} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := c.Do(ctx, req, CallOptions{})
		if err != nil {
			cancel()
			t.Fatalf("GET %s: %v", u, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		cancel()
	}
	if n := c.limiter.open(); n > 1 {
		t.Errorf("open connections = %d, want at most 1", n)
	}
}

func TestConnectTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.ConnectTimeout = 50 * time.Millisecond
	// Only loopback traffic is allowed, so a connect that never completes
	// is simulated by a dialer that blocks until its context ends.
	cfg.Dialer = func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c := newClient(t, cfg)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/", strings.NewReader("{}"))

	start := time.Now()
	_, err := c.Do(context.Background(), req, CallOptions{})
	elapsed := time.Since(start)
	if !errors.Is(err, ErrConnectTimeout) {
		t.Fatalf("error = %v, want ErrConnectTimeout", err)
	}
	if elapsed < cfg.ConnectTimeout || elapsed > 2*time.Second {
		t.Errorf("failed after %s, want about %s", elapsed, cfg.ConnectTimeout)
	}
	if n := c.limiter.open(); n != 0 {
		t.Errorf("slots held after failed dial = %d, want 0", n)
	}
}

func TestReadTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.ReadTimeout = 100 * time.Millisecond
	cfg.RetryAttempts = 1

	t.Run("headers", func(t *testing.T) {
		c := newClient(t, cfg)
		g := newGate(t)
		srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) { g.wait(r) })
		start := time.Now()
		_, err := get(t, c, srv.URL, CallOptions{})
		elapsed := time.Since(start)
		if !errors.Is(err, ErrReadTimeout) {
			t.Fatalf("error = %v, want ErrReadTimeout", err)
		}
		if elapsed < cfg.ReadTimeout || elapsed > 2*time.Second {
			t.Errorf("failed after %s, want about %s", elapsed, cfg.ReadTimeout)
		}
	})

	t.Run("body stalls", func(t *testing.T) {
		c := newClient(t, cfg)
		g := newGate(t)
		srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			g.wait(r)
		})
		resp, err := get(t, c, srv.URL, CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		start := time.Now()
		b, err := io.ReadAll(resp.Body)
		elapsed := time.Since(start)
		if !errors.Is(err, ErrReadTimeout) {
			t.Fatalf("read error = %v, want ErrReadTimeout", err)
		}
		if string(b) != "partial" {
			t.Errorf("read %q before the stall, want %q", b, "partial")
		}
		if elapsed > 2*time.Second {
			t.Errorf("read failed after %s, want about %s", elapsed, cfg.ReadTimeout)
		}
	})

	// The timeout is per wait, not for the whole body: a body arriving in
	// steady pieces may take longer than ReadTimeout in total.
	t.Run("slow but steady body", func(t *testing.T) {
		cfg := cfg
		cfg.ReadTimeout = 300 * time.Millisecond // wide margin over the 50 ms pace
		c := newClient(t, cfg)
		srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for range 8 { // 400 ms in total, more than ReadTimeout
				<-tick.C
				_, _ = io.WriteString(w, "x")
				w.(http.Flusher).Flush()
			}
		})
		resp, err := get(t, c, srv.URL, CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != "xxxxxxxx" {
			t.Fatalf("body %q, error %v; want 8 bytes and no error", b, err)
		}
	})
}
