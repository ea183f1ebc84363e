package admitstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/kv"
	"gatehouse/internal/kv/kvtest"
)

// TestPrefixIsolation: admission stores over key-value stores of two
// prefixes share no nonce and no window; on Redis every key of Admit, and
// the replay registry, live under the key-value store's prefix.
func TestPrefixIsolation(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		s1, s2 := open(t, b, "one:"), open(t, b, "two:")
		req := AdmitRequest{App: "app", Nonce: "n1", NonceTTL: time.Minute, Verified: true, Limit: 1, Window: time.Minute}
		mustAdmit(t, s1, req)
		if a := mustAdmit(t, s2, req); a.DuplicateNonce || a.Limited {
			t.Fatalf("Admit under the second prefix: got %+v; nonces and windows must not be shared", a)
		}

		// In Redis, every key, Admit's included, lives under the prefix.
		r, ok := s1.(*redisStore)
		if !ok {
			return
		}
		p1 := b.Prefix + "one:"
		keys, err := r.c.Keys(ctx, p1+"admit:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 3 { // the nonce, the window and the epoch
			t.Fatalf("Admit keys under %q: %q, want 3", p1, keys)
		}
		if n := r.c.Exists(ctx, p1+"replay:starts").Val(); n != 1 {
			t.Fatalf("the replay registry is not under the prefix %q", p1)
		}
	})
}

// TestUnavailable checks that Admit on a store that cannot be reached
// fails with errs.Unavailable, promptly.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	over := func(t *testing.T, url string) Store {
		s, err := Open(ctx, openKV(t, url, ""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	stores := []struct {
		name string
		open func(t *testing.T) Store
	}{
		// Port 1 on loopback: nothing listens, the dial is refused.
		{"redis refused", func(t *testing.T) Store { return over(t, "redis://127.0.0.1:1") }},
		{"redis hung", func(t *testing.T) Store { return over(t, kvtest.HungServer(t)) }},
		{"redis closed", func(t *testing.T) Store {
			kvs := openKV(t, "redis://127.0.0.1:1", "")
			s, err := Open(ctx, kvs)
			if err != nil {
				t.Fatal(err)
			}
			if err := kvs.Close(); err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"memory closed", func(t *testing.T) Store {
			s := over(t, "")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.open(t)
			start := time.Now()
			_, err := s.Admit(ctx, AdmitRequest{App: "a", Nonce: "n", NonceTTL: time.Minute, Verified: true, Limit: 1, Window: time.Second})
			elapsed := time.Since(start)
			if !errors.Is(err, errs.Unavailable) {
				t.Errorf("Admit: got %v, want errs.Unavailable", err)
			}
			// The budget is 1s; allow for a loaded test machine.
			if elapsed > 1500*time.Millisecond {
				t.Errorf("Admit: took %v, want about 1s at most", elapsed)
			}
		})
	}
}

// TestCanceledContext checks that Admit honours its context on both
// backends and reports the cause.
func TestCanceledContext(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Admit(ctx, AdmitRequest{App: "a", Nonce: "n", NonceTTL: time.Minute, Verified: true, Limit: 1, Window: time.Second})
		if !errors.Is(err, errs.Unavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Admit with a canceled context: %v, want errs.Unavailable and context.Canceled", err)
		}
	})
}

// TestHealthChecks: on Redis the replay registry is refreshed with each
// readiness check (kv.CheckHealth), registering a server it lost; the
// memory store adds no check.
func TestHealthChecks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		r, ok := s.(*redisStore)
		if !ok {
			if n := len(s.HealthChecks()); n != 0 {
				t.Fatalf("memory store: %d health checks, want none", n)
			}
			return
		}
		ctx := context.Background()
		key := r.registryKey()
		if err := r.c.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		kvs := openKV(t, b.URL, b.Prefix)
		if h := kv.CheckHealth(ctx, kvs, true, s.HealthChecks()...); h.Err != nil {
			t.Fatalf("CheckHealth: %+v", h)
		}
		if n := r.c.HLen(ctx, key).Val(); n != 1 {
			t.Fatalf("the replay registry holds %d servers after a readiness check, want 1", n)
		}
	})
}
