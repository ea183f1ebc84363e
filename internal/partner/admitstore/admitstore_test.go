package admitstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/kv"
	"gatehouse/internal/kv/kvtest"
	"gatehouse/internal/partner"
)

// The tests name the gate's types as the key-value store's tests did.
type (
	AdmitRequest = partner.AdmitRequest
	Admission    = partner.Admission
)

// backend is one implementation under test (kvtest.Backend): the memory
// store on a fake clock, Redis on the server's.
type backend = kvtest.Backend

// forEachBackend runs fn against the memory store and against Redis.
func forEachBackend(t *testing.T, fn func(t *testing.T, b *backend)) {
	t.Helper()
	kvtest.ForEachBackend(t, fn)
}

// open returns an admission store for the test over a key-value store of
// b; sub namespaces it further, so a test can open stores that must not
// see each other. Redis keys are deleted when the test ends.
func open(t testing.TB, b *backend, sub string) Store {
	t.Helper()
	ctx := context.Background()
	if b.Clock != nil {
		s, err := Open(ctx, openKV(t, "", ""), WithClock(b.Clock.Now))
		if err != nil {
			t.Fatalf("open memory store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	prefix := b.Prefix + sub
	kvs := openKV(t, b.URL, prefix)
	c, _ := kv.RedisClient(kvs)
	t.Cleanup(func() { kvtest.DeleteKeys(t, c, prefix) })
	s, err := Open(ctx, kvs)
	if err != nil {
		t.Fatalf("open redis store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openKV opens the key-value store an admission store is opened over,
// closed when the test ends.
func openKV(t testing.TB, url, prefix string) kv.Store {
	t.Helper()
	s, err := kv.Open(context.Background(), url, kv.WithPrefix(prefix))
	if err != nil {
		t.Fatalf("open key-value store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// liveCount is the number of counted admissions of app in the window ending
// now, read without changing anything.
func liveCount(t *testing.T, s Store, app string, window time.Duration) int {
	t.Helper()
	switch s := s.(type) {
	case *memoryStore:
		sh := s.shard(app)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		st := sh.apps[app]
		if st == nil {
			return 0
		}
		cutoff := s.tick() - int64(window)
		n := 0
		for i := range st.times.len() {
			if st.times.at(i) > cutoff {
				n++
			}
		}
		return n
	case *redisStore:
		ctx := context.Background()
		now, err := s.c.Time(ctx).Result()
		if err != nil {
			t.Fatalf("redis TIME: %v", err)
		}
		_, key, _ := s.admitKeys(app, "")
		min := "(" + strconv.FormatInt(now.UnixMicro()-window.Microseconds(), 10)
		n, err := s.c.ZCount(ctx, key, min, "+inf").Result()
		if err != nil {
			t.Fatalf("ZCOUNT: %v", err)
		}
		return int(n)
	default:
		t.Fatalf("unknown store %T", s)
		return 0
	}
}

func mustAdmit(t *testing.T, s Store, r AdmitRequest) Admission {
	t.Helper()
	a, err := s.Admit(context.Background(), r)
	if err != nil {
		t.Fatalf("Admit(%+v): %v", r, err)
	}
	return a
}
