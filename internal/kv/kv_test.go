package kv

import (
	"context"
	"testing"

	"gatehouse/internal/kv/kvtest"
)

// backend is one implementation under test (kvtest.Backend).
type backend = kvtest.Backend

// forEachBackend runs fn against the memory store and against Redis.
func forEachBackend(t *testing.T, fn func(t *testing.T, b *backend)) {
	t.Helper()
	kvtest.ForEachBackend(t, fn)
}

// open returns a store for the test; sub namespaces it further, so a test
// can open stores that must not see each other. Redis keys are deleted when
// the test ends.
func open(t testing.TB, b *backend, sub string) Store {
	t.Helper()
	ctx := context.Background()
	if b.Clock != nil {
		s, err := Open(ctx, "", WithClock(b.Clock.Now))
		if err != nil {
			t.Fatalf("open memory store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	prefix := b.Prefix + sub
	s, err := Open(ctx, b.URL, WithPrefix(prefix))
	if err != nil {
		t.Fatalf("open redis store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() { deleteKeys(t, s, prefix) })
	return s
}

func deleteKeys(t testing.TB, s Store, prefix string) {
	c, _ := RedisClient(s)
	kvtest.DeleteKeys(t, c, prefix)
}
