package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"gatehouse/internal/testenv"
)

// TestHotReadsHaveTheirOwnPool: on Postgres the prepared hot reads (Stmt)
// run on a pool of their own, sized by CPU, and the write pool keeps its
// size; on SQLite there is one pool.
func TestHotReadsHaveTheirOwnPool(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		url := b.DatabaseURL
		if b.Embedded() {
			url = "sqlite:" + filepath.Join(t.TempDir(), "g.db")
		}
		db, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var one int
		if err := NewStmt(db, "SELECT 1").QueryRow(ctx, nil, &one); err != nil || one != 1 {
			t.Fatalf("hot read: %d, %v", one, err)
		}
		if b.Embedded() {
			if db.pgReads != nil {
				t.Fatal("SQLite: the hot reads have a pool of their own, want the one pool")
			}
			return
		}
		if db.pgReads == nil {
			t.Fatal("Postgres: the hot reads share the write pool")
		}
		if got, want := db.pgReads.Config().MaxConns, int32(DefaultReadConns()); got != want {
			t.Errorf("read pool: %d connections, want %d", got, want)
		}
		if got := db.SQL.Stats().MaxOpenConnections; got != DefaultMaxConns {
			t.Errorf("write pool: %d connections, want %d", got, DefaultMaxConns)
		}
		if db.pgReads.Stat().TotalConns() == 0 || db.SQL.Stats().InUse != 0 {
			t.Error("the hot read did not run on the read pool")
		}
		// The sizes are settings (GATEHOUSE_DATABASE_MAX_CONNS, _READ_CONNS).
		sized, err := Open(ctx, url, WithPoolSizes(3, 5))
		if err != nil {
			t.Fatal(err)
		}
		defer sized.Close()
		if got := sized.SQL.Stats().MaxOpenConnections; got != 3 {
			t.Errorf("write pool with MaxConns 3: %d connections", got)
		}
		if got := sized.pgReads.Config().MaxConns; got != 5 {
			t.Errorf("read pool with ReadConns 5: %d connections", got)
		}
		// No row is sql.ErrNoRows, as on SQLite.
		if err := NewStmt(db, "SELECT 1 WHERE false").QueryRow(ctx, nil, &one); !errors.Is(err, sql.ErrNoRows) {
			t.Errorf("no row: %v, want sql.ErrNoRows", err)
		}
	})
}
