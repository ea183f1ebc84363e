package floor

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/internal/benchfloor"
)

// Every SQLite floor opens its database with the synchronous setting the
// harness passes, which defaults to the server's (FULL).
func TestSQLiteFloorsUseTheServersSync(t *testing.T) {
	if bench.DefaultSQLiteSync != "full" {
		t.Fatalf("default -sqlite-sync %q, want the server's default full", bench.DefaultSQLiteSync)
	}
	ctx := context.Background()
	openers := map[string]func(dir, sync string) (*sql.DB, error){
		"sqlite-select": func(dir, sync string) (*sql.DB, error) {
			return benchfloor.OpenSQLiteOrders(ctx, filepath.Join(dir, "s.db"), sync)
		},
		"update-sqlite": func(dir, sync string) (*sql.DB, error) {
			return openUpdateBaseline(ctx, "update-sqlite", filepath.Join(dir, "u.db"), sync, "")
		},
		"outbox-sqlite": func(dir, sync string) (*sql.DB, error) {
			return openFloorOutbox(ctx, "outbox-sqlite", filepath.Join(dir, "o.db"), sync, "", 1, "http://127.0.0.1:1/", "{}")
		},
		"insert-sqlite": func(dir, sync string) (*sql.DB, error) {
			return openTicketFloor(ctx, "insert-sqlite", filepath.Join(dir, "i.db"), sync, "")
		},
	}
	for name, open := range openers {
		for sync, want := range map[string]int{bench.DefaultSQLiteSync: 2, "normal": 1} {
			t.Run(name+"/"+sync, func(t *testing.T) {
				db, err := open(t.TempDir(), sync)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				var got int
				if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("PRAGMA synchronous = %d, want %d", got, want)
				}
			})
		}
	}
}
