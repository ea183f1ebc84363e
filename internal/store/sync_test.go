package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// TestSQLiteSynchronous checks the synchronous pragma every pooled SQLite
// connection runs with: FULL (2) by default, NORMAL (1) when asked.
func TestSQLiteSynchronous(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []store.Option
		want int
	}{
		{"default", nil, 2},
		{"full", []store.Option{store.WithSQLiteSync("full")}, 2},
		{"empty keeps the default", []store.Option{store.WithSQLiteSync("")}, 2},
		{"normal", []store.Option{store.WithSQLiteSync("normal")}, 1},
		{"NORMAL", []store.Option{store.WithSQLiteSync("NORMAL")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "g.db"), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if got := sqliteSynchronous(t, db, 4); got != tc.want {
				t.Fatalf("PRAGMA synchronous = %d, want %d", got, tc.want)
			}
		})
	}
	if _, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "g.db"), store.WithSQLiteSync("off")); err == nil {
		t.Fatal("synchronous off: want an error")
	}
}

// TestSQLiteSyncOnPostgres: the setting is accepted and ignored on Postgres.
func TestSQLiteSyncOnPostgres(t *testing.T) {
	db, err := store.Open(context.Background(), testenv.PostgresURL(t), store.WithSQLiteSync("normal"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// sqliteSynchronous holds n connections of db's pool at once and returns
// their common synchronous setting, failing if they differ.
func sqliteSynchronous(t *testing.T, db *store.DB, n int) int {
	t.Helper()
	ctx := context.Background()
	got := -1
	for range n {
		c, err := db.SQL.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var v int
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if got != -1 && v != got {
			t.Fatalf("connections disagree: synchronous %d and %d", got, v)
		}
		got = v
	}
	return got
}
