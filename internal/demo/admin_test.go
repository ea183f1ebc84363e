package demo_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/demo"
	"gatehouse/internal/testenv"
)

// TestDemoAdmin: seeding twice is harmless, a working admin API key is
// printed, and the printed curl line lists the demo's partner apps.
func TestDemoAdmin(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		cfg := apptest.Config(t, b)
		if err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ls, err := a.Listen()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		for range 2 {
			out.Reset()
			if err := demo.Seed(ctx, a, ls, &out); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Serve(ctx, ls) }()
		t.Cleanup(func() {
			cancel()
			<-done
		})
		text := out.String()
		m := regexp.MustCompile(`(?m)^api key:\s+(\S+)$`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no API key in:\n%s", text)
		}
		if b.Embedded() != (m[1] == demo.DemoAPIKey) {
			t.Fatalf("embedded mode prints the documented key, Postgres a derived one: %s", m[1])
		}
		if n := a.DB.APIKey.Query().CountX(ctx); n != 1 {
			t.Fatalf("seeding twice made %d keys", n)
		}
		if _, err := a.APIKeys.Authenticate(ctx, m[1]); err != nil {
			t.Fatalf("the printed key: %v", err)
		}
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl not installed: the printed command is not run")
		}
		line := regexp.MustCompile(`(?m)^curl -s \S+/graphql -H '[^']+' -H 'X-API-Key: [^']+' \\\n  -d '[^\n]*'$`).FindString(text)
		if line == "" {
			t.Fatalf("no curl line in:\n%s", text)
		}
		got, err := exec.Command("sh", "-c", line).Output()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if !strings.Contains(string(got), `"appKey":"`+demo.DemoAppKey+`"`) || strings.Contains(string(got), `"errors"`) {
			t.Fatalf("the printed curl answered %s", got)
		}
	})
}
