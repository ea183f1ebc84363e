package demo_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
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
	cfg := apptest.Config(t, b)
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
	for range 2 {
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
