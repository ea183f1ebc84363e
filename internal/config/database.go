package config

import (
	"errors"
	"slices"
	"strings"

	"gatehouse/internal/store"
)

// Database is where the data lives.
type Database struct {
	DataDir string `flag:"data-dir" default:"./data" usage:"embedded database and generated dev keys" doc:"embedded database file and generated dev keys"`
	// URL is filled in from DataDir by Resolve when empty.
	URL string `flag:"database-url" empty:"sqlite:<data dir>/gatehouse.db" usage:"sqlite:PATH or postgres://… (default sqlite:<data dir>/gatehouse.db)" doc:"sqlite:PATH or postgres://… / postgresql://… (a connection pooler such as PgBouncer in transaction mode is detected: see [deploy](deploy.md#postgres-and-connection-poolers))"`
	// SQLiteSync is SQLite's synchronous pragma (store.SQLiteSyncFull or
	// store.SQLiteSyncNormal).
	SQLiteSync string `flag:"sqlite-sync" default:"full" usage:"embedded database: full (a write acknowledged survives a power cut) or normal (faster; the last writes may be lost on a power cut)" doc:"embedded database: full flushes every commit to the disk, so an acknowledged write survives a power cut; normal flushes at checkpoints only: faster, survives a crash of the process but may lose the last commits on a power cut or OS crash (see [decisions](decisions.md#embedded-durability))"`
	// DirectURL is a session connection to the same database, for LISTEN
	// and the migration lock, when URL goes through a transaction pooler.
	DirectURL string `flag:"database-direct-url" empty:"empty = the database URL" usage:"postgres://… of the same database without the pooler, for LISTEN/NOTIFY and the migration lock" doc:"postgres://… of the same database reached without a transaction pooler (a session connection): LISTEN/NOTIFY wake-ups of webhook deliveries and the migration lock use it. Through a transaction pooler without it, deliveries queued by other replicas are found by a 500 ms poll (start-up WARNs)"`
	// MaxConns bounds the Postgres write pool of each process.
	MaxConns int `flag:"database-max-conns" default:"40" usage:"Postgres connections for transactions and writes, per process" doc:"Postgres connections of each process for transactions and writes (commits that wait together share a WAL flush)"`
	// ReadConns bounds the Postgres pool of the hot reads; 0: by CPU.
	ReadConns int `flag:"database-read-conns" empty:"0 = 4 per CPU, 8 to 32" usage:"Postgres connections for the hot single-statement reads, per process (0: 4 per CPU, 8 to 32)" doc:"Postgres connections of each process for the hot single-statement reads (the signed order query); 0: 4 per CPU, at least 8, at most 32"`
}

// Embedded reports whether the database is the embedded SQLite file (an
// empty URL becomes one).
func (d *Database) Embedded() bool { return d.URL == "" || strings.HasPrefix(d.URL, "sqlite:") }

// Postgres reports whether the database is a Postgres server.
func (d *Database) Postgres() bool {
	return strings.HasPrefix(d.URL, "postgres://") || strings.HasPrefix(d.URL, "postgresql://")
}

// Validate checks the data directory, the URLs' schemes, the SQLite
// synchronous setting and the pool sizes.
func (d *Database) Validate() error {
	var errs []error
	if d.DataDir == "" {
		errs = append(errs, invalidf(d, &d.DataDir, "must not be empty"))
	}
	switch {
	case d.URL == "sqlite:":
		errs = append(errs, invalidf(d, &d.URL, "sqlite: needs a path"))
	case d.Embedded(), d.Postgres():
	default:
		errs = append(errs, invalidf(d, &d.URL, "must start with sqlite:, postgres:// or postgresql://"))
	}
	if !slices.Contains(store.SQLiteSyncModes, strings.ToLower(d.SQLiteSync)) {
		errs = append(errs, invalidf(d, &d.SQLiteSync, "must be one of %s", strings.Join(store.SQLiteSyncModes, ", ")))
	}
	switch {
	case d.DirectURL == "":
	case !d.Postgres():
		errs = append(errs, invalidf(d, &d.DirectURL, "set without a Postgres %s", envOf(d, &d.URL)))
	case !strings.HasPrefix(d.DirectURL, "postgres://") && !strings.HasPrefix(d.DirectURL, "postgresql://"):
		errs = append(errs, invalidf(d, &d.DirectURL, "must start with postgres:// or postgresql://"))
	}
	if d.MaxConns < 1 || d.MaxConns > 10000 {
		errs = append(errs, invalidf(d, &d.MaxConns, "must be between 1 and 10000"))
	}
	if d.ReadConns < 0 || d.ReadConns > 10000 {
		errs = append(errs, invalidf(d, &d.ReadConns, "must be between 0 (by CPU) and 10000"))
	}
	return errors.Join(errs...)
}
