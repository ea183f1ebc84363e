package store

import (
	"context"
	"database/sql"
	"fmt"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/postgres"
	atlas "ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
	"entgo.io/ent/dialect"
)

// versioned is what the versioned migration of one kind of database
// needs: one migration path per database, the same steps for both.
type versioned struct {
	name    string // dialect.Postgres or dialect.SQLite
	dirPath string // the migration directory in the repository
	open    func(atlas.ExecQuerier) (migrate.Driver, error)
	// hasTable is a query of one row, one column: whether the table
	// named by $1 exists.
	hasTable string
	// countTables is a query counting the tables other than $1 (the
	// revisions table): gatehouse's, made by auto-migrate, if any.
	countTables string
	// adoptAt picks the file at which a database made by auto-migrate is
	// adopted.
	adoptAt func(ctx context.Context, q querier, files []migrate.File) (migrate.File, error)
	// replay returns the schema that files build, as Atlas sees it,
	// without keeping it.
	replay func(ctx context.Context, conn *sql.Conn, files []migrate.File) (*atlas.Schema, error)
	// verify, when set, runs in every migration's transaction before it
	// commits.
	verify func(ctx context.Context, tx *sql.Tx) error
}

func versionedFor(dialectName string) (versioned, error) {
	switch dialectName {
	case dialect.Postgres:
		return versioned{
			name: dialect.Postgres, dirPath: MigrationsDir,
			open:        func(q atlas.ExecQuerier) (migrate.Driver, error) { return postgres.Open(q) },
			hasTable:    `SELECT to_regclass($1) IS NOT NULL`,
			countTables: `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> $1`,
			// The first file is exactly what the last auto-migrating
			// release created.
			adoptAt: func(_ context.Context, _ querier, files []migrate.File) (migrate.File, error) { return files[0], nil },
			replay:  replayPostgres,
		}, nil
	case dialect.SQLite:
		return versioned{
			name: dialect.SQLite, dirPath: SQLiteMigrationsDir,
			open:        func(q atlas.ExecQuerier) (migrate.Driver, error) { return sqlite.Open(q) },
			hasTable:    sqliteHasTable,
			countTables: `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> $1`,
			adoptAt:     sqliteAdoptAt,
			replay:      replaySQLite,
			verify:      foreignKeyCheck,
		}, nil
	default:
		return versioned{}, fmt.Errorf("no migrations for the dialect %q", dialectName)
	}
}

// tableExists reports whether the database has the table name.
func (v versioned) tableExists(ctx context.Context, q querier, name string) (bool, error) {
	return tableExists(ctx, q, v.hasTable, name)
}

// tableExists runs hasTable, a versioned.hasTable query, for name.
func tableExists(ctx context.Context, q querier, hasTable, name string) (bool, error) {
	var ok bool
	if err := q.QueryRowContext(ctx, hasTable, name).Scan(&ok); err != nil {
		return false, fmt.Errorf("inspect database: %w", err)
	}
	return ok, nil
}

// madeByAutoMigrate reports whether the database already holds
// gatehouse's tables (made before versioned migrations, by auto-migrate).
func (v versioned) madeByAutoMigrate(ctx context.Context, q querier) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, v.countTables, revisionsTable).Scan(&n); err != nil {
		return false, fmt.Errorf("inspect database: %w", err)
	}
	return n > 0, nil
}

// baselineCheckSchema is where replayPostgres replays files, inside a
// transaction that is always rolled back.
const baselineCheckSchema = "gatehouse_baseline_check"

// replayPostgres runs files in a scratch schema and returns that schema as
// Atlas sees it; the transaction is rolled back, so nothing of it stays.
func replayPostgres(ctx context.Context, conn *sql.Conn, files []migrate.File) (*atlas.Schema, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // always rolled back: the schema is scratch
	for _, s := range []string{`CREATE SCHEMA ` + baselineCheckSchema, `SET LOCAL search_path TO ` + baselineCheckSchema} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return nil, err
		}
	}
	if err := runFiles(ctx, tx, files); err != nil {
		return nil, err
	}
	drv, err := postgres.Open(tx)
	if err != nil {
		return nil, err
	}
	s, err := drv.InspectSchema(ctx, baselineCheckSchema, nil)
	if err != nil {
		return nil, fmt.Errorf("inspect the replayed migrations: %w", err)
	}
	return s, nil
}

// runFiles runs the statements of files on q, in order.
func runFiles(ctx context.Context, q querier, files []migrate.File) error {
	for _, f := range files {
		stmts, err := f.Stmts()
		if err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := q.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("replay %s: %w", f.Name(), err)
			}
		}
	}
	return nil
}
