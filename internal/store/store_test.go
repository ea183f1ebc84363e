package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

func TestOpenMigratePing(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		url := b.DatabaseURL
		if b.Embedded() {
			url = "sqlite:" + filepath.Join(t.TempDir(), "sub", "g.db")
		}
		db, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// Migrating twice is a no-op, as replicas restarting do.
		for i := 0; i < 2; i++ {
			if err := db.Migrate(ctx); err != nil {
				t.Fatalf("migrate %d: %v", i, err)
			}
		}
		if err := db.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Ticket.Create().SetTitle("x").Save(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOpenRejectsUnknownScheme(t *testing.T) {
	if _, err := store.Open(context.Background(), "mysql://x"); err == nil {
		t.Fatal("want error")
	}
}
