package partner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAppCacheStaleness(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Unix(1000, 0))
	var loads atomic.Int64
	version := atomic.Int64{}
	c := newAppCache(func(_ context.Context, key string) (*credentials, error) {
		loads.Add(1)
		if key == "none" {
			return nil, nil
		}
		return &credentials{app: App{AppKey: key, RateLimit: int(version.Load())}}, nil
	})
	c.now = clk.Now
	ctx := context.Background()
	get := func(key string) *credentials {
		cr, err := c.get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return cr
	}
	version.Store(1)
	if get("k").app.RateLimit != 1 || loads.Load() != 1 {
		t.Fatal("first get loads")
	}
	version.Store(2) // written elsewhere
	clk.Advance(DefaultCacheTTL - time.Millisecond)
	if get("k").app.RateLimit != 1 || loads.Load() != 1 {
		t.Fatal("within the TTL the cached value is served")
	}
	clk.Advance(time.Millisecond)
	if get("k").app.RateLimit != 2 || loads.Load() != 2 {
		t.Fatal("at the TTL the value is read again")
	}
	// Unknown keys are remembered too.
	first, second := get("none"), get("none")
	if first != nil || second != nil || loads.Load() != 3 {
		t.Fatalf("unknown key loads: %d", loads.Load())
	}
	// A local write is seen at once.
	version.Store(3)
	c.forget("k")
	if get("k").app.RateLimit != 3 {
		t.Fatal("forget drops the entry")
	}
}

// TestAppCacheSharedLoad: concurrent misses for one key make one read, and
// a read failure is not cached.
func TestAppCacheSharedLoad(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var loads atomic.Int64
	fail := atomic.Bool{}
	c := newAppCache(func(context.Context, string) (*credentials, error) {
		loads.Add(1)
		<-release
		if fail.Load() {
			return nil, errors.New("db down")
		}
		return &credentials{}, nil
	})
	// An entry that outlives the test: a goroutine the scheduler runs only
	// after the shared read has finished must find it cached, however late.
	// (A miss just before the read stored its entry, whose own read started
	// just after, used to read again.)
	c.ttl = time.Hour
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.get(context.Background(), "k"); err != nil {
				t.Error(err)
			}
		}()
	}
	// Wait until the first load is in flight, then let it finish.
	deadline := time.Now().Add(5 * time.Second)
	for loads.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no load started")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d loads for 20 concurrent misses", n)
	}
	fail.Store(true)
	c.forget("k")
	if _, err := c.get(context.Background(), "k"); err == nil {
		t.Fatal("load error not returned")
	}
	fail.Store(false)
	if _, err := c.get(context.Background(), "k"); err != nil || loads.Load() != 3 {
		t.Fatalf("after a failed load the next get reads again: %v, %d loads", err, loads.Load())
	}
}
