// Command gatehouse-migration writes the next Postgres migration file from
// the difference between the Ent schema (ent/schema) and the migration
// directory: `make migration name=add_refund_reason`. With -rehash it only
// recomputes atlas.sum, after a hand edit of a file not yet merged.
//
// It creates a throw-away database on a local Postgres server, replays the
// directory there, asks Ent (through Atlas) for the statements that take
// that schema to the Ent schema, writes them as
// internal/store/migrations/postgres/<version>_<name>.sql, updates
// atlas.sum, and drops the database. The server defaults to the one the
// tests use (GATEHOUSE_TEST_POSTGRES_URL, else postgres://postgres@127.0.0.1:5432/test).
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
	dir := flag.String("dir", store.MigrationsDir, "the migration directory")
	rehash := flag.Bool("rehash", false, "only recompute atlas.sum (after editing a file that is not merged yet)")
	flag.Parse()
	if *rehash {
		if err := store.RehashMigrations(*dir); err != nil {
			return err
		}
		fmt.Printf("recomputed %s/atlas.sum\n", *dir)
		return nil
	}
	if !validName.MatchString(*name) {
		return errors.New("name=… is required: lower-case letters, digits and _, e.g. make migration name=add_refund_reason")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dev, drop, err := throwAwayDatabase(ctx, *server)
	if err != nil {
		return err
	}
	defer drop()
	file, err := store.WriteMigration(ctx, dev, *dir, *name)
	switch {
	case err != nil:
		return err
	case file == "":
		fmt.Println("the migration directory already matches ent/schema: nothing written")
	default:
		fmt.Printf("wrote %s/%s and updated atlas.sum: review it, then commit both\n", *dir, file)
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
