package store_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"entgo.io/ent/dialect"

	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// migrationFiles are the names of the embedded migration files of
// dialectName, oldest first.
func migrationFiles(t *testing.T, dialectName string) []string {
	t.Helper()
	dir, err := store.Migrations(dialectName) // also checks atlas.sum against the files
	if err != nil {
		t.Fatal(err)
	}
	files, err := dir.Files()
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name()
	}
	return names
}

func openPostgres(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openSQLite opens (without migrating) the SQLite file at path, or a new
// one when path is empty.
func openSQLite(t *testing.T, path string) *store.DB {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "g.db")
	}
	db, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openFresh opens an empty database of the backend, with the name of its
// dialect and of its migration directory.
func openFresh(t *testing.T, b testenv.Backend) (db *store.DB, dialectName, dir string) {
	if b.Embedded() {
		return openSQLite(t, ""), dialect.SQLite, store.SQLiteMigrationsDir
	}
	return openPostgres(t), dialect.Postgres, store.MigrationsDir
}

// TestMigrationsMatchSchema is the check that each committed migration
// directory (Postgres, SQLite) and ent/schema agree: the files applied to
// a fresh database leave nothing for Ent to change, and atlas.sum matches
// the files. It fails after a schema change without `make migration
// name=…`.
func TestMigrationsMatchSchema(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		db, dialectName, dirPath := openFresh(t, b)
		files := migrationFiles(t, dialectName)
		rep, err := db.MigrateReport(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(rep.Applied, ",") != strings.Join(files, ",") || rep.Adopted != "" {
			t.Fatalf("fresh database: %+v, want every file applied: %v", rep, files)
		}
		pending, err := store.PendingSchemaChanges(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if pending != "" {
			t.Fatalf("ent/schema and %s disagree; run `make migration name=<what changed>`. Ent would still run:\n%s", dirPath, pending)
		}
		// The directory on disk is the one embedded, and its sum is valid.
		onDisk, err := os.ReadDir(filepath.Join("..", "..", dirPath))
		if err != nil {
			t.Fatal(err)
		}
		if len(onDisk) != len(files)+1 { // + atlas.sum
			t.Fatalf("%d entries on disk, %d migrations embedded", len(onDisk), len(files))
		}
		// Again: nothing to do, and the status says so.
		if rep, err := db.MigrateReport(ctx); err != nil || rep.Changed() || !strings.Contains(rep.String(), "up to date") {
			t.Fatalf("second run: %v %v", rep, err)
		}
		st, err := db.MigrationStatus(ctx)
		if err != nil || len(st.Applied) != len(files) || len(st.Pending) != 0 || st.Unadopted {
			t.Fatalf("status %+v %v", st, err)
		}
	})
}

// TestWriteMigrationNothingToDo: `make migration` on up-to-date
// directories writes nothing (it replays each directory on a throw-away
// database and diffs it with ent/schema).
func TestWriteMigrationNothingToDo(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var (
			dialectName, src = dialect.SQLite, store.SQLiteMigrationsDir
			dev              *sql.DB
			drop             func()
			err              error
		)
		if b.Embedded() {
			dev, drop, err = store.SQLiteDevDB()
		} else {
			dialectName, src = dialect.Postgres, store.MigrationsDir
			dev, err = sql.Open("pgx", testenv.PostgresURL(t))
			drop = func() { dev.Close() }
		}
		if err != nil {
			t.Fatal(err)
		}
		defer drop()
		dir := copyDir(t, filepath.Join("..", "..", src))
		file, err := store.WriteMigration(context.Background(), dialectName, dev, dir, "nothing", "")
		if err != nil || file != "" {
			t.Fatalf("WriteMigration = %q, %v; want nothing written", file, err)
		}
	})
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// baselineOnly makes db look like a database of the last release before
// versioned migrations: the baseline's tables, made by auto-migrate (the
// baseline is exactly what it created), and no revisions.
func baselineOnly(t *testing.T, db *store.DB) {
	t.Helper()
	dir, err := store.PostgresMigrations()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := dir.Files()
	stmts, err := files[0].Stmts()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := db.SQL.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
}

// migrateAdoptingAtFirst checks that db, made by auto-migrate, is to be
// adopted at the first of files, and migrates it: adopted there with
// nothing to add, every later file applied.
func migrateAdoptingAtFirst(t *testing.T, db *store.DB, files []string) store.Report {
	t.Helper()
	ctx := context.Background()
	st, err := db.MigrationStatus(ctx)
	if err != nil || !st.Unadopted || st.Baseline != files[0] || len(st.Pending) != len(files)-1 {
		t.Fatalf("status before: %+v %v", st, err)
	}
	rep, err := db.MigrateReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Adopted != files[0] || len(rep.Repaired) != 0 || strings.Join(rep.Applied, ",") != strings.Join(files[1:], ",") {
		t.Fatalf("report %+v", rep)
	}
	return rep
}

// TestMigrateAdoptsAutoMigratedDatabase: a database made before versioned
// migrations is recognised, adopted at the baseline with its data intact,
// and migrated on from there; an older one gets what it lacks; one that
// differs otherwise is refused with the differences named.
func TestMigrateAdoptsAutoMigratedDatabase(t *testing.T) {
	ctx := context.Background()
	files := migrationFiles(t, dialect.Postgres)

	t.Run("as the last release left it", func(t *testing.T) {
		db := openPostgres(t)
		baselineOnly(t, db)
		if _, err := db.SQL.Exec(`INSERT INTO tickets (title, status, created_at) VALUES ('kept', 'OPEN', now())`); err != nil {
			t.Fatal(err)
		}
		rep := migrateAdoptingAtFirst(t, db, files)
		if !strings.Contains(rep.String(), "adopted the existing database") {
			t.Fatalf("report text %q", rep)
		}
		if n, err := db.Ticket.Query().Count(ctx); err != nil || n != 1 {
			t.Fatalf("data: %d %v", n, err)
		}
		if pending, err := store.PendingSchemaChanges(ctx, db); err != nil || pending != "" {
			t.Fatalf("after adoption Ent would still run %q (%v)", pending, err)
		}
		st, err := db.MigrationStatus(ctx)
		if err != nil || st.Unadopted || len(st.Pending) != 0 || !st.Applied[0].Baseline {
			t.Fatalf("status after: %+v %v", st, err)
		}
	})

	t.Run("from an older release", func(t *testing.T) {
		db := openPostgres(t)
		baselineOnly(t, db)
		if _, err := db.SQL.Exec(`ALTER TABLE skus DROP COLUMN update_time; DROP INDEX ticket_created_at_id`); err != nil {
			t.Fatal(err)
		}
		rep, err := db.MigrateReport(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(rep.Repaired, ", ")
		if rep.Adopted == "" || !strings.Contains(got, "skus: add column update_time") || !strings.Contains(got, "tickets: add index ticket_created_at_id") {
			t.Fatalf("report %+v", rep)
		}
		if pending, err := store.PendingSchemaChanges(ctx, db); err != nil || pending != "" {
			t.Fatalf("after repair Ent would still run %q (%v)", pending, err)
		}
	})

	t.Run("changed by hand", func(t *testing.T) {
		db := openPostgres(t)
		baselineOnly(t, db)
		if _, err := db.SQL.Exec(`ALTER TABLE tickets ADD COLUMN note text; ALTER TABLE skus ALTER COLUMN name TYPE text`); err != nil {
			t.Fatal(err)
		}
		_, err := db.MigrateReport(ctx)
		if err == nil || !strings.Contains(err.Error(), "tickets: column note is not in the baseline") || !strings.Contains(err.Error(), "skus: column name differs from the baseline") {
			t.Fatalf("err = %v", err)
		}
		if st, err := db.MigrationStatus(ctx); err != nil || !st.Unadopted || len(st.Applied) != 0 {
			t.Fatalf("a refused adoption recorded something: %+v %v", st, err)
		}
	})
}

// TestMigrateReplicasTogether: replicas starting at once on a fresh
// database apply each file exactly once between them.
func TestMigrateReplicasTogether(t *testing.T) {
	url := testenv.PostgresURL(t)
	files := migrationFiles(t, dialect.Postgres)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []string
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := store.Open(context.Background(), url)
			if err != nil {
				t.Error(err)
				return
			}
			defer db.Close()
			rep, err := db.MigrateReport(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			applied = append(applied, rep.Applied...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(applied) != len(files) {
		t.Fatalf("applied %v, want each of %v once", applied, files)
	}
}
