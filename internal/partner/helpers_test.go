package partner

import (
	"sync"
	"testing"
	"time"

	"gatehouse/internal/secret"
	"gatehouse/internal/store"
)

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
