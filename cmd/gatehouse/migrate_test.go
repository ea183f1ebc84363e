package main

import (
	"strings"
	"testing"

	"entgo.io/ent/dialect"

	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// TestMigrateCommand: `gatehouse migrate` says what it applied (and that
// nothing was left the second time); --status lists applied and pending
// files without changing anything. Both databases have their files.
func TestMigrateCommand(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		global, _ := cliArgs(t, b)
		dialectName := dialect.Postgres
		if b.Embedded() {
			dialectName = dialect.SQLite
		}
		dir, err := store.Migrations(dialectName)
		if err != nil {
			t.Fatal(err)
		}
		files, _ := dir.Files()
		first := files[0].Name()

		out, _, err := runCLI(t, append(global, "migrate", "--status"), "")
		if err != nil || !strings.Contains(out, "pending   "+first) || !strings.Contains(out, "0 applied") {
			t.Fatalf("status before: %q %v", out, err)
		}
		out, _, err = runCLI(t, append(global, "migrate"), "")
		if err != nil || !strings.Contains(out, "applied ") || !strings.Contains(out, first) {
			t.Fatalf("first migrate: %q %v", out, err)
		}
		out, _, err = runCLI(t, append(global, "migrate"), "")
		if err != nil || !strings.HasPrefix(out, "schema is up to date, nothing applied") {
			t.Fatalf("second migrate: %q %v", out, err)
		}
		out, _, err = runCLI(t, append(global, "migrate", "--status"), "")
		if err != nil || !strings.Contains(out, "applied   "+first) || !strings.Contains(out, "0 pending") {
			t.Fatalf("status after: %q %v", out, err)
		}
	})
}
