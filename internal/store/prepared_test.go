package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"gatehouse/internal/errs"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// A Stmt runs with ? placeholders on both backends, reports no row as
// sql.ErrNoRows and a request whose context is over as errs.Unavailable
// (the 503 of every other database call).
func TestStmt(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		count := store.NewStmt(db, `SELECT COUNT(*) FROM orders WHERE order_no = ? OR order_no = ?`)
		defer count.Close()
		for range 3 { // prepared once, run again
			var n int
			if err := count.QueryRow(ctx, []any{"A", "B"}, &n); err != nil || n != 0 {
				t.Fatalf("count: %d, %v", n, err)
			}
		}
		id := store.NewStmt(db, `SELECT id FROM orders WHERE order_no = ?`)
		defer id.Close()
		var v int
		if err := id.QueryRow(ctx, []any{"none"}, &v); !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("missing row: %v, want sql.ErrNoRows", err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := id.QueryRow(done, []any{"none"}, &v); errs.KindOf(err) != errs.Unavailable {
			t.Fatalf("cancelled: %v, want errs.Unavailable", err)
		}
	})
}

// Through database/sql, pgx prepares a query's text once per connection
// and reuses it (its default statement cache): any fixed SQL text, Ent's
// included, is parsed and planned by Postgres once per connection, not
// per call.
func TestPostgresStatementCache(t *testing.T) {
	db := storetest.OpenURL(t, testenv.PostgresURL(t))
	ctx := context.Background()
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const q = `SELECT COUNT(*) FROM orders WHERE order_no = $1`
	for range 3 {
		var n int
		if err := conn.QueryRowContext(ctx, q, "x").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_prepared_statements WHERE statement = $1`, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d prepared statements hold the query on its connection, want 1 (the cached one)", n)
	}
}
