package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"ariga.io/atlas/sql/migrate"
	"entgo.io/ent/dialect"
)

// MigrationsDir and SQLiteMigrationsDir are where the migration files of
// Postgres and of the embedded SQLite database live in the repository:
// `make migration name=…` writes there, and the binary embeds them.
const (
	MigrationsDir       = "internal/store/migrations/postgres"
	SQLiteMigrationsDir = "internal/store/migrations/sqlite"
)

//go:embed migrations/postgres migrations/sqlite
var embeddedMigrations embed.FS

// PostgresMigrations returns the embedded Postgres migration directory
// (the .sql files and atlas.sum).
func PostgresMigrations() (*migrate.MemDir, error) { return Migrations(dialect.Postgres) }

// SQLiteMigrations returns the embedded SQLite migration directory.
func SQLiteMigrations() (*migrate.MemDir, error) { return Migrations(dialect.SQLite) }

// Migrations returns the embedded migration directory of dialectName
// (dialect.Postgres or dialect.SQLite), checked against its atlas.sum.
func Migrations(dialectName string) (*migrate.MemDir, error) {
	v, err := versionedFor(dialectName)
	if err != nil {
		return nil, err
	}
	embedded := path.Join("migrations", path.Base(v.dirPath))
	dir := &migrate.MemDir{} // private: not registered by name
	entries, err := fs.ReadDir(embeddedMigrations, embedded)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(embeddedMigrations, path.Join(embedded, e.Name()))
		if err != nil {
			return nil, err
		}
		if err := dir.WriteFile(e.Name(), b); err != nil {
			return nil, err
		}
	}
	if err := migrate.Validate(dir); err != nil {
		return nil, fmt.Errorf("migration directory %s: %w (regenerate with make migration)", v.dirPath, err)
	}
	return dir, nil
}

// migrateVersioned applies the pending migration files of v on conn,
// each file in its own transaction. On Postgres conn holds the migration
// lock; on SQLite its foreign keys are off (see migrateSQLite). A
// database without revisions but with gatehouse's tables was made by
// auto-migrate (gatehouse before versioned migrations): it is adopted at
// the file v.adoptAt picks, once it matches it (see adopt).
func migrateVersioned(ctx context.Context, conn *sql.Conn, v versioned) (Report, error) {
	rep := Report{Dialect: v.name}
	dir, err := Migrations(v.name)
	if err != nil {
		return rep, err
	}
	files, err := dir.Files()
	if err != nil || len(files) == 0 {
		return rep, fmt.Errorf("migration directory %s holds no migrations: %w", v.dirPath, err)
	}
	rrw := revisions{conn, v.name}
	if err := rrw.ensure(ctx); err != nil {
		return rep, err
	}
	revs, err := rrw.ReadRevisions(ctx)
	if err != nil {
		return rep, fmt.Errorf("read %s: %w", revisionsTable, err)
	}
	var opts []migrate.ExecutorOption
	if len(revs) == 0 {
		made, err := v.madeByAutoMigrate(ctx, conn)
		if err != nil {
			return rep, err
		}
		if made {
			at, err := v.adoptAt(ctx, conn, files)
			if err != nil {
				return rep, err
			}
			if rep.Repaired, err = adopt(ctx, conn, v, files, at); err != nil {
				return rep, err
			}
			rep.Adopted = at.Name()
			opts = append(opts, migrate.WithBaselineVersion(at.Version()))
		} else {
			// Empty of gatehouse's tables (other schemas or objects of
			// the operator's are no concern of ours).
			opts = append(opts, migrate.WithAllowDirty(true))
		}
	}
	drv, err := v.open(conn)
	if err != nil {
		return rep, err
	}
	ex, err := migrate.NewExecutor(drv, dir, rrw, opts...)
	if err != nil {
		return rep, err
	}
	pending, err := ex.Pending(ctx)
	switch {
	case errors.Is(err, migrate.ErrNoPendingFiles):
	case err != nil:
		return rep, fmt.Errorf("pending migrations: %w", err)
	}
	for _, f := range pending {
		applied, err := applyFile(ctx, conn, v, dir, f)
		if err != nil {
			return rep, err
		}
		if applied {
			rep.Applied = append(rep.Applied, f.Name())
		}
	}
	rep.Version = files[len(files)-1].Version()
	return rep, nil
}

// applyFile runs one migration file and records its revision in one
// transaction: a file is applied entirely or not at all. It reports
// false when another process recorded the file meanwhile (two processes
// starting on one SQLite file; on Postgres the lock rules it out).
func applyFile(ctx context.Context, conn *sql.Conn, v versioned, dir migrate.Dir, f migrate.File) (bool, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	rrw := revisions{tx, v.name}
	if rev, err := rrw.ReadRevision(ctx, f.Version()); err == nil && rev.Applied == rev.Total {
		return false, nil
	}
	drv, err := v.open(tx)
	if err != nil {
		return false, err
	}
	ex, err := migrate.NewExecutor(drv, dir, rrw)
	if err != nil {
		return false, err
	}
	if err := ex.Execute(ctx, f); err != nil {
		return false, fmt.Errorf("migration %s failed, nothing of it applied: %w", f.Name(), err)
	}
	if v.verify != nil {
		if err := v.verify(ctx, tx); err != nil {
			return false, fmt.Errorf("migration %s, nothing of it applied: %w", f.Name(), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s: commit: %w", f.Name(), err)
	}
	return true, nil
}
