package app_test

import (
	"context"
	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"log/slog"
	"testing"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

// newEmbeddedApp builds (but does not serve) an app on SQLite + memory,
// with mutate applied to its configuration first.
func newEmbeddedApp(t *testing.T, mutate func(*config.Config)) *app.App {
	t.Helper()
	cfg := apptest.Config(t, testenv.Backend{Name: "sqlite"})
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return a
}
