package demo_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/demo"
	"gatehouse/internal/testenv"
)

// seedAndServe builds the app on backend b, seeds the demo twice (seeding
// must be idempotent), serves both listeners until the test ends, and
// returns the app, its listeners and what the second seeding printed.
func seedAndServe(t *testing.T, b testenv.Backend, opts ...func(*config.Config)) (*app.App, *app.Listeners, string) {
	t.Helper()
	return serveDemo(t, b, 2, opts...)
}

// serveDemo is seedAndServe with the demo seeded seeds times: once is a
// fresh data dir's first start (make run), whose ids the docs name.
func serveDemo(t *testing.T, b testenv.Backend, seeds int, opts ...func(*config.Config)) (*app.App, *app.Listeners, string) {
	t.Helper()
	cfg := apptest.Config(t, b)
	// As serve --demo: the demo app may call back a receiver on loopback
	// (a port of the test's own).
	cfg.WebhookLoopbackApps = []string{demo.DemoAppKey}
	cfg.Demo.Receiver = freeAddr(t)
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ls, err := a.Listen()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var out bytes.Buffer
	for range seeds {
		out.Reset()
		if err := demo.Seed(ctx, a, ls, &out); err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	if err := a.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return a, ls, out.String()
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// curlRE matches the banner's GraphQL calls: URL, API key, body.
var curlRE = regexp.MustCompile(`(?m)^curl -s (\S+) -H 'Content-Type: application/json' -H 'X-API-Key: ([^']+)' \\\n  -d '([^']+)'$`)

// post runs one of the banner's curl calls (a match of curlRE) and fails
// the test unless it succeeds without errors or warnings.
func post(t *testing.T, c []string) string {
	t.Helper()
	status, b := send(t, c[1], c[2], c[3])
	if status != 200 || strings.Contains(b, `"errors"`) || strings.Contains(b, `"warnings"`) {
		t.Fatalf("%s: %d %s", c[3], status, b)
	}
	return b
}

// send posts a GraphQL body with API key key to url.
func send(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
