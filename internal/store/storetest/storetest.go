// Package storetest opens migrated databases for tests: a SQLite file in
// the test's temp dir, or the fresh Postgres database of a testenv.Backend.
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// Open opens and migrates backend b's database for one test and closes it
// when the test ends.
func Open(t testing.TB, b testenv.Backend) *store.DB {
	t.Helper()
	url := b.DatabaseURL
	if b.Embedded() {
		url = "sqlite:" + filepath.Join(t.TempDir(), "test.db")
	}
	return OpenURL(t, url)
}

// OpenURL opens and migrates the database at url for one test.
func OpenURL(t testing.TB, url string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}
