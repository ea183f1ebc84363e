package demo_test

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"gatehouse/internal/demo"
	"gatehouse/internal/testenv"
)

// TestDemoAdmin: seeding twice is harmless, a working admin API key is
// printed, and the printed curl line lists the demo's partner apps.
func TestDemoAdmin(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		a, _, text := seedAndServe(t, b)
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
