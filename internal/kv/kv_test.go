package kv

import (
	"context"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

func newFakeClock() *testenv.Clock {
	return testenv.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
}

// backend is one implementation under test. The memory store runs on a fake
// clock, so its checks are exact; Redis runs on the server's real clock, so
// its checks poll with a deadline or assert bounds.
type backend struct {
	name   string
	clock  *testenv.Clock // memory only
	url    string         // redis only
	prefix string         // redis only: private to the test
}

// forEachBackend runs fn as a parallel subtest against the memory store and
// against Redis. Redis is looked up inside its subtest, so a missing Redis
// skips (or, in CI, fails) only that half.
func forEachBackend(t *testing.T, fn func(t *testing.T, b *backend)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		fn(t, &backend{name: "memory", clock: newFakeClock()})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		fn(t, &backend{name: "redis", url: testenv.RedisURL(t), prefix: testenv.KeyPrefix(t)})
	})
}

// open returns a store for the test; sub namespaces it further, so a test
// can open stores that must not see each other. Redis keys are deleted when
// the test ends.
func (b *backend) open(t testing.TB, sub string) Store {
	t.Helper()
	ctx := context.Background()
	if b.clock != nil {
		s, err := Open(ctx, "", WithClock(b.clock.Now))
		if err != nil {
			t.Fatalf("open memory store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	prefix := b.prefix + sub
	s, err := Open(ctx, b.url, WithPrefix(prefix))
	if err != nil {
		t.Fatalf("open redis store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() { deleteKeys(t, s, prefix) })
	return s
}

func deleteKeys(t testing.TB, s Store, prefix string) {
	c, _ := RedisClient(s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("scan %s*: %v", prefix, err)
		return
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Logf("delete test keys: %v", err)
		}
	}
}

// now is the time as the store sees it (up to the distance between this
// machine's clock and the Redis server's, which is the same machine here).
func (b *backend) now() time.Time {
	if b.clock != nil {
		return b.clock.Now()
	}
	return time.Now()
}

// step lets d pass between two calls where a test wants requests spread
// out. Only the fake clock can be moved; with Redis the real gaps (usually
// well under d) are what the bounds in the assertions account for.
func (b *backend) step(d time.Duration) {
	if b.clock != nil {
		b.clock.Advance(d)
	}
}

// await lets d pass and then requires cond. The fake clock jumps exactly d
// and cond must hold at once; with Redis, cond is polled until it holds or
// a generous deadline passes.
func (b *backend) await(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if b.clock != nil {
		b.clock.Advance(d)
		if !cond() {
			t.Fatalf("%s: not true after %v", what, d)
		}
		return
	}
	deadline := time.Now().Add(d + 5*time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, d+5*time.Second)
		}
		<-tick.C
	}
}

// stays requires cond to hold throughout the next d: checked once after
// the fake clock jumps d, or polled for d of real time with Redis.
func (b *backend) stays(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if b.clock != nil {
		b.clock.Advance(d)
		if !cond() {
			t.Fatalf("%s: no longer true after %v", what, d)
		}
		return
	}
	end := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(end) {
		if !cond() {
			t.Fatalf("%s: no longer true before %v passed", what, d)
		}
		<-tick.C
	}
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
