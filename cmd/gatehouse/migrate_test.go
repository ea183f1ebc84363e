package main

import (
	"strings"
	"testing"

	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// TestMigrateCommand: `gatehouse migrate` says what it applied (and that
// nothing was left the second time); --status lists applied and pending
// files without changing anything.
func TestMigrateCommand(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		global, _ := cliArgs(t, b)
		if b.Embedded() {
			out, errOut, err := runCLI(t, append(global, "migrate"), "")
			if err != nil || !strings.Contains(out, "create table tickets") {
				t.Fatalf("first migrate: %q %q %v", out, errOut, err)
			}
			out, _, err = runCLI(t, append(global, "migrate", "--status"), "")
			if err != nil || !strings.Contains(out, "auto-migrate keeps its schema") {
				t.Fatalf("status: %q %v", out, err)
			}
			return
		}
		dir, err := store.PostgresMigrations()
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
