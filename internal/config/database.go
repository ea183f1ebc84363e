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
	URL string `flag:"database-url" empty:"sqlite:<data dir>/gatehouse.db" usage:"sqlite:PATH or postgres://… (default sqlite:<data dir>/gatehouse.db)" doc:"sqlite:PATH or postgres://… / postgresql://…"`
	// SQLiteSync is SQLite's synchronous pragma (store.SQLiteSyncFull or
	// store.SQLiteSyncNormal).
	SQLiteSync string `flag:"sqlite-sync" default:"full" usage:"embedded database: full (a write acknowledged survives a power cut) or normal (faster; the last writes may be lost on a power cut)" doc:"embedded database: full flushes every commit to the disk, so an acknowledged write survives a power cut; normal flushes at checkpoints only: faster, survives a crash of the process but may lose the last commits on a power cut or OS crash (see [decisions](decisions.md#embedded-durability))"`
}

// Embedded reports whether the database is the embedded SQLite file (an
// empty URL becomes one).
func (d *Database) Embedded() bool { return d.URL == "" || strings.HasPrefix(d.URL, "sqlite:") }

// Postgres reports whether the database is a Postgres server.
func (d *Database) Postgres() bool {
	return strings.HasPrefix(d.URL, "postgres://") || strings.HasPrefix(d.URL, "postgresql://")
}

// Validate checks the data directory, the URL's scheme and the SQLite
// synchronous setting.
func (d *Database) Validate() error {
	var errs []error
	if d.DataDir == "" {
		errs = append(errs, errors.New("GATEHOUSE_DATA_DIR: must not be empty"))
	}
	switch {
	case d.URL == "sqlite:":
		errs = append(errs, errors.New("GATEHOUSE_DATABASE_URL: sqlite: needs a path"))
	case d.Embedded(), d.Postgres():
	default:
		errs = append(errs, errors.New("GATEHOUSE_DATABASE_URL: must start with sqlite:, postgres:// or postgresql://"))
	}
	if !slices.Contains(store.SQLiteSyncModes, strings.ToLower(d.SQLiteSync)) {
		errs = append(errs, errors.New("GATEHOUSE_SQLITE_SYNC: must be one of "+strings.Join(store.SQLiteSyncModes, ", ")))
	}
	return errors.Join(errs...)
}
