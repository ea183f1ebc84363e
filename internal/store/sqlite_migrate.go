package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"ariga.io/atlas/sql/migrate"
	atlas "ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
	"entgo.io/ent/dialect"
)

// The embedded SQLite database made by auto-migrate (gatehouse before its
// versioned migrations) is adopted at one of two files of
// migrations/sqlite: one from before webhook endpoints (no endpoints
// table) at the first file, the schema of the last release before them,
// so that the endpoints file — with its data step, each app's callback
// URL becoming its first endpoint — runs on it; any later one at
// sqliteLastAutoMigrated, the schema of the last release whose embedded
// database auto-migrate kept (it had already run that data step in Go).
const (
	sqliteEndpointsTable   = "webhook_endpoints"
	sqliteLastAutoMigrated = "20261129021408"
)

// sqliteHasTable is SQLite's versioned.hasTable.
const sqliteHasTable = `SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = $1`

// migrateSQLite applies the pending SQLite migration files on a
// connection of its own with foreign keys off, as SQLite requires of a
// change that rebuilds a table (a table dropped with foreign keys on
// would first delete its rows, and with them, by ON DELETE actions,
// rows of other tables); every file's transaction checks the foreign
// keys before it commits (foreignKeyCheck).
func (d *DB) migrateSQLite(ctx context.Context) (Report, error) {
	v, err := versionedFor(dialect.SQLite)
	if err != nil {
		return Report{}, err
	}
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return Report{}, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = off"); err != nil {
		return Report{}, err
	}
	rep, err := migrateVersioned(ctx, conn, v)
	if _, onErr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = on"); onErr != nil {
		// A connection without foreign keys must not go back to the pool.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		if err == nil {
			err = onErr
		}
	}
	return rep, err
}

// sqliteAdoptAt picks the file a database made by auto-migrate is adopted
// at (see sqliteLastAutoMigrated).
func sqliteAdoptAt(ctx context.Context, q querier, files []migrate.File) (migrate.File, error) {
	endpoints, err := tableExists(ctx, q, sqliteHasTable, sqliteEndpointsTable)
	if err != nil {
		return nil, err
	}
	if !endpoints {
		return files[0], nil
	}
	for _, f := range files {
		if f.Version() == sqliteLastAutoMigrated {
			return f, nil
		}
	}
	return nil, fmt.Errorf("migration directory %s lacks the file %s_… at which databases made by auto-migrate are adopted", SQLiteMigrationsDir, sqliteLastAutoMigrated)
}

// replaySQLite runs files on a private in-memory database and returns its
// schema as Atlas sees it.
func replaySQLite(ctx context.Context, _ *sql.Conn, files []migrate.File) (*atlas.Schema, error) {
	db, err := sql.Open("sqlite", "file:replay?mode=memory&_pragma=foreign_keys(0)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection: one in-memory database
	if err := runFiles(ctx, db, files); err != nil {
		return nil, err
	}
	drv, err := sqlite.Open(db)
	if err != nil {
		return nil, err
	}
	s, err := drv.InspectSchema(ctx, "", nil)
	if err != nil {
		return nil, fmt.Errorf("inspect the replayed migrations: %w", err)
	}
	return s, nil
}

// foreignKeyCheck fails when a row refers to a row that does not exist:
// with foreign keys off, a migration could leave one behind.
func foreignKeyCheck(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return fmt.Errorf("foreign key check: %w", err)
	}
	defer rows.Close()
	var broken []string
	for rows.Next() {
		var (
			table, parent string
			rowid         sql.NullInt64
			fk            int
		)
		if err := rows.Scan(&table, &rowid, &parent, &fk); err != nil {
			return fmt.Errorf("foreign key check: %w", err)
		}
		broken = append(broken, fmt.Sprintf("%s row %d refers to a missing %s", table, rowid.Int64, parent))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("foreign key check: %w", err)
	}
	if len(broken) > 0 {
		return fmt.Errorf("foreign keys broken: %s", strings.Join(broken, "; "))
	}
	return nil
}

// SQLiteDevDB opens an empty SQLite database in a temporary directory,
// with foreign keys on as Ent requires, for writing a migration from the
// difference; the function returned closes and removes it.
func SQLiteDevDB() (*sql.DB, func(), error) {
	dir, err := os.MkdirTemp("", "gatehouse-migration-")
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "dev.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }, nil
}
