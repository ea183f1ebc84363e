package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/testenv"
)

// TestVersionLifecycleRefused: start-up refuses a version this build does
// not serve, a sunset without a deprecation and a notice under 90 days,
// naming every problem at once, before any storage is opened.
func TestVersionLifecycleRefused(t *testing.T) {
	cfg := apptest.Config(t, testenv.Backend{Name: "sqlite"})
	dbFile := filepath.Join(t.TempDir(), "never.db")
	cfg.Database.URL = "sqlite:" + dbFile
	cfg.API.Deprecated = "v2=2026-01-01,v7=2026-01-01"
	cfg.API.Sunset = "v1=2026-12-31,v2=2026-02-01"
	cfg.API.Released = "v8=2026-01-01"
	if err := cfg.Resolve(); err != nil {
		t.Fatalf("the format is fine, the lifecycle is not: %v", err)
	}
	_, err := app.New(context.Background(), cfg, testLogger(t))
	if err == nil {
		t.Fatal("started")
	}
	for _, want := range []string{
		"GATEHOUSE_API_DEPRECATED: unknown API version v7",
		"GATEHOUSE_API_RELEASED: unknown API version v8",
		"GATEHOUSE_API_SUNSET: v1 has a sunset (2026-12-31) but no deprecation",
		"GATEHOUSE_API_SUNSET: v2 retires on 2026-02-01, 31 days after its deprecation on 2026-01-01",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if matches, _ := filepath.Glob(dbFile + "*"); len(matches) != 0 {
		t.Errorf("storage was opened: %v", matches)
	}
}
