package catalogue

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"entgo.io/ent/dialect"

	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// TestLockStatementRuns runs the catalogue's lock on each backend (its
// part of the dispatcher's TestEveryStatementRuns), in a transaction that
// is rolled back.
func TestLockStatementRuns(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		url, d := b.DatabaseURL, dialect.Postgres
		if b.Embedded() {
			url, d = "sqlite:"+filepath.Join(t.TempDir(), "statements.db"), dialect.SQLite
		}
		db := storetest.OpenURL(t, url)
		ctx := context.Background()
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, lockCatalogue(d)); err != nil {
			t.Fatalf("lockCatalogue on %s: %v", d, err)
		}
	})
}

// TestCatalogueLockTakesSQLiteWriter: lockCatalogueSQLite takes SQLite's
// write lock by itself, in a transaction begun DEFERRED (the store's begin
// IMMEDIATE and hold it already), so a declaration's count cannot be read
// while another writer may still insert.
func TestCatalogueLockTakesSQLiteWriter(t *testing.T) {
	dsn := "file:" + filepath.Join(t.TempDir(), "lock.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(0)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE webhook_event_types (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil) // DEFERRED: no lock yet
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, lockCatalogue(dialect.SQLite)); err != nil {
		t.Fatal(err)
	}
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, `BEGIN IMMEDIATE`); err == nil {
		_, _ = other.ExecContext(ctx, `ROLLBACK`)
		t.Fatal("another writer began while the catalogue's lock was held")
	}
}
