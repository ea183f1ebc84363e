// Command gatehouse-migration writes the next migration files, one for
// Postgres and one for the embedded SQLite database, from the difference
// between the Ent schema (ent/schema) and each migration directory:
// `make migration name=add_refund_reason`. With -rehash it only
// recomputes both atlas.sum files, after a hand edit of a file not yet
// merged.
//
// For Postgres it creates a throw-away database on a local Postgres
// server, for SQLite a throw-away database file; it replays the directory
// there, asks Ent (through Atlas) for the statements that take that
// schema to the Ent schema, writes them as
// internal/store/migrations/<dialect>/<version>_<name>.sql (the same
// version in both), updates atlas.sum, and removes the database. The
// Postgres server defaults to the one the tests use
// (GATEHOUSE_TEST_POSTGRES_URL, else postgres://postgres@127.0.0.1:5432/test).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"time"

	"ariga.io/atlas/sql/migrate"
	"entgo.io/ent/dialect"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_]{0,62}$`)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse-migration:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("name", "", "what the change is, in snake_case (add_refund_reason)")
	server := flag.String("postgres", testenv.PostgresAdminURL(), "a Postgres server to create the throw-away database on")
	pgDir := flag.String("postgres-dir", store.MigrationsDir, "the Postgres migration directory")
	sqliteDir := flag.String("sqlite-dir", store.SQLiteMigrationsDir, "the SQLite migration directory")
	rehash := flag.Bool("rehash", false, "only recompute both atlas.sum files (after editing a file that is not merged yet)")
	flag.Parse()
	if *rehash {
		for _, dir := range []string{*pgDir, *sqliteDir} {
			if err := store.RehashMigrations(dir); err != nil {
				return err
			}
			fmt.Printf("recomputed %s/atlas.sum\n", dir)
		}
		return nil
	}
	if !validName.MatchString(*name) {
		return errors.New("name=… is required: lower-case letters, digits and _, e.g. make migration name=add_refund_reason")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	version := migrate.NewVersion()
	pg, dropPG, err := throwAwayDatabase(ctx, *server)
	if err != nil {
		return err
	}
	defer dropPG()
	lite, dropLite, err := store.SQLiteDevDB()
	if err != nil {
		return err
	}
	defer dropLite()
	for _, t := range []struct {
		dialect, dir string
		dev          *sql.DB
	}{{dialect.Postgres, *pgDir, pg}, {dialect.SQLite, *sqliteDir, lite}} {
		file, err := store.WriteMigration(ctx, t.dialect, t.dev, t.dir, *name, version)
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", t.dialect, err)
		case file == "":
			fmt.Printf("%s already matches ent/schema: nothing written\n", t.dir)
		default:
			fmt.Printf("wrote %s/%s and updated atlas.sum: review it, then commit both\n", t.dir, file)
		}
	}
	return nil
}

// throwAwayDatabase creates an empty database on the server of adminURL
// and returns it with a function that drops it.
func throwAwayDatabase(ctx context.Context, adminURL string) (*sql.DB, func(), error) {
	admin, err := sql.Open("pgx", adminURL)
	if err != nil {
		return nil, nil, err
	}
	name := "gatehouse_migration_" + testenv.RandomSuffix()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		admin.Close()
		return nil, nil, fmt.Errorf("create a throw-away database on %s (is Postgres running? see -postgres): %w", redact(adminURL), err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		admin.Close()
		return nil, nil, err
	}
	u.Path = "/" + name
	dev, err := sql.Open("pgx", u.String())
	if err != nil {
		admin.Close()
		return nil, nil, err
	}
	drop := func() {
		dev.Close()
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(dctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			fmt.Fprintf(os.Stderr, "gatehouse-migration: drop %s: %v\n", name, err)
		}
		admin.Close()
	}
	return dev, drop, nil
}

// redact hides a password in a URL shown in an error.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the server"
	}
	return u.Redacted()
}
