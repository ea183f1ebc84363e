package app_test

import (
	"context"
	"gatehouse/internal/config"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/testenv"
)

// TestHealthAndReadiness: /readyz says whether this replica can serve,
// not whether every dependency is healthy: with the database gone it still
// answers 200 (the routes that need no database keep serving; those that
// do answer 503 themselves: internal/e2e's resilience tests), quickly, and names the database
// "unavailable" in its body; with GATEHOUSE_READY_REQUIRES=database it
// answers 503 instead, as before. The replay memory's start is absent
// before any loss (not 1970).
func TestHealthAndReadiness(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		for _, requires := range []string{"", "database,kv"} {
			t.Run("requires="+requires, func(t *testing.T) {
				e := apptest.Start(t, b, func(c *config.Config) { c.Server.ReadyRequires = requires })
				if r := e.Do(t, "GET", e.PublicURL+"/healthz", ""); r.Status != 200 {
					t.Fatalf("healthz: %d", r.Status)
				}
				r := e.Do(t, "GET", e.PublicURL+"/readyz", "")
				m := r.Map(t)
				if r.Status != 200 || m["database"] != "ok" || m["kv"] != "ok" || m["status"] != "ready" {
					t.Fatalf("readyz: %d %s", r.Status, r.Body)
				}
				if v, ok := m["replay_memory_start"]; ok && strings.HasPrefix(v.(string), "1970") {
					t.Fatalf("readyz shows the Unix epoch as the replay memory's start: %s", r.Body)
				}
				_ = e.App.DB.SQL.Close()
				t0 := time.Now()
				r = e.Do(t, "GET", e.PublicURL+"/readyz", "")
				want, wantStatus := http.StatusOK, "ready"
				if requires != "" {
					want, wantStatus = http.StatusServiceUnavailable, "database_unavailable"
				}
				if m := r.Map(t); r.Status != want || m["database"] != "unavailable" || m["kv"] != "ok" || m["status"] != wantStatus {
					t.Fatalf("readyz without database: %d %s, want %d with status %s", r.Status, r.Body, want, wantStatus)
				}
				if took := time.Since(t0); took > 3*time.Second {
					t.Fatalf("readyz took %v without database", took)
				}
			})
		}
	})
}

// TestReadyRequiresValidated: GATEHOUSE_READY_REQUIRES names only
// database and kv.
func TestReadyRequiresValidated(t *testing.T) {
	for raw, ok := range map[string]bool{"": true, "database": true, " kv , database ": true, "redis": false, "database,postgres": false} {
		s := config.Server{ReadyRequires: raw}
		if _, err := s.ReadyRequired(); (err == nil) != ok {
			t.Errorf("GATEHOUSE_READY_REQUIRES=%q: %v", raw, err)
		}
	}
}

func TestRequestID(t *testing.T) {
	e := apptest.Start(t, testenv.Backend{Name: "sqlite"})
	r := e.Do(t, "GET", e.PublicURL+"/healthz", "", "X-Request-Id", "abc.DEF_123-x")
	if got := r.Header.Get("X-Request-Id"); got != "abc.DEF_123-x" {
		t.Fatalf("well-formed id not echoed: %q", got)
	}
	for _, bad := range []string{"has space", strings.Repeat("a", 65), "semi;colon", "<script>"} {
		r := e.Do(t, "GET", e.PublicURL+"/healthz", "", "X-Request-Id", bad)
		got := r.Header.Get("X-Request-Id")
		if got == "" || got == bad {
			t.Fatalf("bad id %q: got %q, want a fresh one", bad, got)
		}
	}
	r1 := e.Do(t, "GET", e.PublicURL+"/api/tickets", "")
	r2 := e.Do(t, "GET", e.AdminURL+"/healthz", "")
	if r1.Header.Get("X-Request-Id") == "" || r2.Header.Get("X-Request-Id") == "" || r1.Header.Get("X-Request-Id") == r2.Header.Get("X-Request-Id") {
		t.Fatal("every response on both listeners carries its own request id")
	}
	// One structured line per request, with the id, and no query string.
	e.Do(t, "GET", e.PublicURL+"/api/tickets?cursor=secretish", "", "X-Request-Id", "trace-me")
	logs := e.Logs.String()
	if !strings.Contains(logs, "request_id=trace-me") || strings.Contains(logs, "secretish") {
		t.Fatalf("request log line missing or leaks the query string:\n%s", logs)
	}
}

func TestUnknownRoutes(t *testing.T) {
	e := apptest.Start(t, testenv.Backend{Name: "sqlite"})
	r := e.Do(t, "GET", e.PublicURL+"/nope", "")
	if r.Status != 404 || r.Map(t)["error"] != "not_found" {
		t.Fatalf("unknown path: %d %s", r.Status, r.Body)
	}
	r = e.Do(t, "POST", e.PublicURL+"/healthz", "")
	if r.Status != 405 {
		t.Fatalf("wrong method: %d %s", r.Status, r.Body)
	}
}

func TestServeAndGracefulShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := newEmbeddedApp(t, nil)
	ls, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ls) }()
	resp, err := http.Get("http://" + ls.Public.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + ls.Admin.Addr().String() + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("metrics: %v %v", err, resp)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve returned %v after shutdown", err)
	}
	if _, err := http.Get("http://" + ls.Public.Addr().String() + "/healthz"); err == nil {
		t.Fatal("listener still accepting after shutdown")
	}
}

func TestCloseTwice(t *testing.T) {
	ctx := context.Background()
	a := newEmbeddedApp(t, nil)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- a.Close(ctx); done <- a.Close(ctx) }()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("second Close hangs")
		}
	}
}

// Request headers over 64 KiB are refused by the server (431), in tests as
// in production.
func TestHeaderLimit(t *testing.T) {
	e := apptest.Start(t, testenv.Backend{Name: "sqlite"})
	r := e.Do(t, "GET", e.PublicURL+"/healthz", "", "X-Padding", strings.Repeat("a", 80<<10))
	if r.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("80 KiB header: %d", r.Status)
	}
}

// With a drain configured, shutdown first answers /readyz with 503 while
// still serving, then stops accepting.
func TestShutdownDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := newEmbeddedApp(t, func(c *config.Config) { c.Server.ShutdownDrainRaw = "2s" })
	// Started as serve starts it: until then /readyz says "starting".
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ls, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ls) }()
	base := "http://" + ls.Public.Addr().String()
	get := func(path string) (int, string, error) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if code, _, err := get("/readyz"); err != nil || code != 200 {
		t.Fatalf("readyz before shutdown: %d %v", code, err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body, err := get("/readyz")
		if err == nil && code == http.StatusServiceUnavailable && strings.Contains(body, "shutting_down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never said shutting_down: %d %q %v", code, body, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the draining server
	}
	// Still serving real requests while draining.
	if code, _, err := get("/api/tickets"); err != nil || code != 200 {
		t.Fatalf("tickets while draining: %d %v", code, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
}
