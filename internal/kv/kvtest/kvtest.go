// Package kvtest runs a test against both key-value backends: the memory
// store on a fake clock, and Redis on the server's real clock. The stores
// built on internal/kv (internal/partner/admitstore) use it as kv does.
package kvtest

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/testenv"
)

// NewFakeClock is the memory backend's clock.
func NewFakeClock() *testenv.Clock {
	return testenv.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
}

// Backend is one implementation under test. The memory store runs on a fake
// clock, so its checks are exact; Redis runs on the server's real clock, so
// its checks poll with a deadline or assert bounds.
type Backend struct {
	Name   string
	Clock  *testenv.Clock // memory only
	URL    string         // redis only
	Prefix string         // redis only: private to the test
}

// ForEachBackend runs fn as a parallel subtest against the memory store and
// against Redis. Redis is looked up inside its subtest, so a missing Redis
// skips (or, in CI, fails) only that half.
func ForEachBackend(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		fn(t, &Backend{Name: "memory", Clock: NewFakeClock()})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		fn(t, &Backend{Name: "redis", URL: testenv.RedisURL(t), Prefix: testenv.KeyPrefix(t)})
	})
}

// DeleteKeys deletes the keys under prefix (at the end of a test).
func DeleteKeys(t testing.TB, c redis.UniversalClient, prefix string) {
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

// Now is the time as the store sees it (up to the distance between this
// machine's clock and the Redis server's, which is the same machine here).
func (b *Backend) Now() time.Time {
	if b.Clock != nil {
		return b.Clock.Now()
	}
	return time.Now()
}

// Step lets d pass between two calls where a test wants requests spread
// out. Only the fake clock can be moved; with Redis the real gaps (usually
// well under d) are what the bounds in the assertions account for.
func (b *Backend) Step(d time.Duration) {
	if b.Clock != nil {
		b.Clock.Advance(d)
	}
}

// Await lets d pass and then requires cond. The fake clock jumps exactly d
// and cond must hold at once; with Redis, cond is polled until it holds or
// a generous deadline passes.
func (b *Backend) Await(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if b.Clock != nil {
		b.Clock.Advance(d)
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

// Stays requires cond to hold throughout the next d: checked once after
// the fake clock jumps d, or polled for d of real time with Redis.
func (b *Backend) Stays(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if b.Clock != nil {
		b.Clock.Advance(d)
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

// HungServer accepts connections and never answers, like a Redis stuck
// behind a dead link, and returns its redis:// URL.
func HungServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "redis://" + ln.Addr().String()
}
