package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/postgres"
	atlas "ariga.io/atlas/sql/schema"
)

// MigrationsDir is where the Postgres migration files live in the
// repository: `make migration name=…` writes there, and the binary embeds
// them.
const MigrationsDir = "internal/store/migrations/postgres"

//go:embed migrations/postgres
var postgresMigrations embed.FS

// PostgresMigrations returns the embedded migration directory (the .sql
// files and atlas.sum).
func PostgresMigrations() (*migrate.MemDir, error) {
	dir := &migrate.MemDir{} // private: not registered by name
	entries, err := fs.ReadDir(postgresMigrations, "migrations/postgres")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(postgresMigrations, path.Join("migrations/postgres", e.Name()))
		if err != nil {
			return nil, err
		}
		if err := dir.WriteFile(e.Name(), b); err != nil {
			return nil, err
		}
	}
	if err := migrate.Validate(dir); err != nil {
		return nil, fmt.Errorf("migration directory %s: %w (regenerate with make migration)", MigrationsDir, err)
	}
	return dir, nil
}

// migratePostgres applies the pending migration files on conn, which
// holds the migration lock, each file in its own transaction. A database
// without revisions but with gatehouse's tables was made by auto-migrate
// (gatehouse before versioned migrations): it is adopted at the first
// file, the baseline, once it matches it (see adopt).
func migratePostgres(ctx context.Context, conn *sql.Conn) (Report, error) {
	rep := Report{Dialect: "postgres"}
	dir, err := PostgresMigrations()
	if err != nil {
		return rep, err
	}
	files, err := dir.Files()
	if err != nil || len(files) == 0 {
		return rep, fmt.Errorf("migration directory %s holds no migrations: %w", MigrationsDir, err)
	}
	rrw := revisions{conn}
	if err := rrw.ensure(ctx); err != nil {
		return rep, err
	}
	revs, err := rrw.ReadRevisions(ctx)
	if err != nil {
		return rep, fmt.Errorf("read %s: %w", revisionsTable, err)
	}
	var opts []migrate.ExecutorOption
	if len(revs) == 0 {
		made, err := madeByAutoMigrate(ctx, conn)
		if err != nil {
			return rep, err
		}
		if made {
			if rep.Repaired, err = adopt(ctx, conn, files[0]); err != nil {
				return rep, err
			}
			rep.Adopted = files[0].Name()
			opts = append(opts, migrate.WithBaselineVersion(files[0].Version()))
		} else {
			// Empty of gatehouse's tables (other schemas or objects of
			// the operator's are no concern of ours).
			opts = append(opts, migrate.WithAllowDirty(true))
		}
	}
	drv, err := postgres.Open(conn)
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
		if err := applyFile(ctx, conn, dir, f); err != nil {
			return rep, err
		}
		rep.Applied = append(rep.Applied, f.Name())
	}
	rep.Version = files[len(files)-1].Version()
	return rep, nil
}

// applyFile runs one migration file and records its revision in one
// transaction: a file is applied entirely or not at all.
func applyFile(ctx context.Context, conn *sql.Conn, dir migrate.Dir, f migrate.File) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	drv, err := postgres.Open(tx)
	if err != nil {
		return err
	}
	ex, err := migrate.NewExecutor(drv, dir, revisions{tx})
	if err != nil {
		return err
	}
	if err := ex.Execute(ctx, f); err != nil {
		return fmt.Errorf("migration %s failed, nothing of it applied: %w", f.Name(), err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", f.Name(), err)
	}
	return nil
}

// madeByAutoMigrate reports whether the current schema already holds
// gatehouse's tables (made before versioned migrations, by auto-migrate).
func madeByAutoMigrate(ctx context.Context, q querier) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_name <> $1`, revisionsTable).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("inspect database: %w", err)
	}
	return n > 0, nil
}

// baselineCheckSchema is where adopt replays the baseline, inside a
// transaction that is always rolled back.
const baselineCheckSchema = "gatehouse_baseline_check"

// adopt brings a database made by auto-migrate to the baseline file and
// reports what it added. The baseline is replayed in a scratch schema in
// a rolled-back transaction and compared with the live schema by Atlas.
// What auto-migrate would have added itself (tables, columns, indexes,
// foreign keys missing because the database came from an older release)
// is added; any other difference (a changed type, a column or table the
// baseline does not have) is refused with the list, since only a person
// can tell what it means.
func adopt(ctx context.Context, conn *sql.Conn, baseline migrate.File) ([]string, error) {
	want, err := replayedBaseline(ctx, conn, baseline)
	if err != nil {
		return nil, err
	}
	drv, err := postgres.Open(conn)
	if err != nil {
		return nil, err
	}
	live, err := drv.InspectSchema(ctx, "", nil)
	if err != nil {
		return nil, fmt.Errorf("inspect database: %w", err)
	}
	live.Tables = slices.DeleteFunc(live.Tables, func(t *atlas.Table) bool { return t.Name == revisionsTable })
	want.Name, want.Attrs = live.Name, live.Attrs
	changes, err := drv.SchemaDiff(live, want)
	if err != nil {
		return nil, fmt.Errorf("compare the database with the baseline: %w", err)
	}
	var added, refused []string
	for _, c := range changes {
		desc, ok := additive(c)
		if ok {
			added = append(added, desc...)
		} else {
			refused = append(refused, desc...)
		}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("the database was made before versioned migrations and differs from the baseline %s in ways "+
			"gatehouse will not change on its own: %s; see docs/migrations.md (Upgrading)", baseline.Name(), strings.Join(refused, "; "))
	}
	if len(changes) == 0 {
		return nil, nil
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	txDrv, err := postgres.Open(tx)
	if err != nil {
		return nil, err
	}
	noQualifier := ""
	if err := txDrv.ApplyChanges(ctx, changes, func(o *migrate.PlanOptions) { o.SchemaQualifier = &noQualifier }); err != nil {
		return nil, fmt.Errorf("bring the database to the baseline: %w", err)
	}
	return added, tx.Commit()
}

// replayedBaseline runs the baseline in a scratch schema and returns that
// schema as Atlas sees it; the transaction is rolled back, so nothing of
// it stays.
func replayedBaseline(ctx context.Context, conn *sql.Conn, baseline migrate.File) (*atlas.Schema, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // always rolled back: the schema is scratch
	stmts, err := baseline.Stmts()
	if err != nil {
		return nil, err
	}
	for _, s := range append([]string{
		`CREATE SCHEMA ` + baselineCheckSchema,
		`SET LOCAL search_path TO ` + baselineCheckSchema,
	}, stmts...) {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("replay the baseline %s: %w", baseline.Name(), err)
		}
	}
	drv, err := postgres.Open(tx)
	if err != nil {
		return nil, err
	}
	s, err := drv.InspectSchema(ctx, baselineCheckSchema, nil)
	if err != nil {
		return nil, fmt.Errorf("inspect the baseline: %w", err)
	}
	return s, nil
}

// additive describes c and reports whether it only adds what is missing.
func additive(c atlas.Change) ([]string, bool) {
	switch c := c.(type) {
	case *atlas.AddTable:
		return []string{"add table " + c.T.Name}, true
	case *atlas.ModifyTable:
		var descs []string
		ok := true
		for _, tc := range c.Changes {
			d, add := describeTableChange(tc)
			descs = append(descs, c.T.Name+": "+d)
			ok = ok && add
		}
		return descs, ok
	case *atlas.DropTable:
		return []string{"table " + c.T.Name + " is not in the baseline"}, false
	default:
		return []string{fmt.Sprintf("%T", c)}, false
	}
}

func describeTableChange(c atlas.Change) (string, bool) {
	switch c := c.(type) {
	case *atlas.AddColumn:
		return "add column " + c.C.Name, true
	case *atlas.AddIndex:
		return "add index " + c.I.Name, true
	case *atlas.AddForeignKey:
		return "add foreign key " + c.F.Symbol, true
	case *atlas.AddCheck:
		return "add check " + c.C.Name, true
	case *atlas.DropColumn:
		return "column " + c.C.Name + " is not in the baseline", false
	case *atlas.ModifyColumn:
		return "column " + c.From.Name + " differs from the baseline", false
	case *atlas.DropIndex:
		return "index " + c.I.Name + " is not in the baseline", false
	case *atlas.ModifyIndex:
		return "index " + c.From.Name + " differs from the baseline", false
	case *atlas.DropForeignKey:
		return "foreign key " + c.F.Symbol + " is not in the baseline", false
	case *atlas.ModifyForeignKey:
		return "foreign key " + c.From.Symbol + " differs from the baseline", false
	default:
		return fmt.Sprintf("%T", c), false
	}
}
