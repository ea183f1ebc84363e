package config

import (
	"testing"

	"gatehouse/internal/store"
)

// TestDefaultsOfLowerPackages: two settings keep a default in the package
// below them as well, because those packages (which this one imports, and
// whose own tests cannot import it) open stores in tools and tests without
// a configuration: the Postgres write pool and SQLite's sync. The declared
// default must be theirs, or a process and a tool would differ. (The
// replay memory's bound is checked the same way in admitstore's tests.)
func TestDefaultsOfLowerPackages(t *testing.T) {
	d := Defaults()
	if d.Database.MaxConns != store.DefaultMaxConns {
		t.Errorf("GATEHOUSE_DATABASE_MAX_CONNS defaults to %d, store to %d", d.Database.MaxConns, store.DefaultMaxConns)
	}
	if d.Database.SQLiteSync != store.SQLiteSyncFull {
		t.Errorf("GATEHOUSE_SQLITE_SYNC defaults to %q, store to %q", d.Database.SQLiteSync, store.SQLiteSyncFull)
	}
}
