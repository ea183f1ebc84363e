package partner

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// openDB opens and migrates backend b's database for one test.
func openDB(t testing.TB, b testenv.Backend) *store.DB {
	t.Helper()
	url := b.DatabaseURL
	if b.Embedded() {
		url = "sqlite:" + filepath.Join(t.TempDir(), "partner.db")
	}
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

func newService(t testing.TB, db *store.DB, opts ...Option) *Service {
	t.Helper()
	s, err := NewService(db.Client, testKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testKey = secret.RandomBytes(32)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }
