package kv

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

func mustGet(t *testing.T, s Store, key string) ([]byte, bool) {
	t.Helper()
	v, ok, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return v, ok
}

func mustIncr(t *testing.T, s Store, key string, ttl time.Duration) int64 {
	t.Helper()
	n, err := s.Incr(context.Background(), key, ttl)
	if err != nil {
		t.Fatalf("Incr(%q): %v", key, err)
	}
	return n
}

func mustSetNX(t *testing.T, s Store, key, value string, ttl time.Duration) bool {
	t.Helper()
	ok, err := s.SetNX(context.Background(), key, []byte(value), ttl)
	if err != nil {
		t.Fatalf("SetNX(%q): %v", key, err)
	}
	return ok
}

func mustSet(t *testing.T, s Store, key, value string, ttl time.Duration) {
	t.Helper()
	if err := s.Set(context.Background(), key, []byte(value), ttl); err != nil {
		t.Fatalf("Set(%q): %v", key, err)
	}
}

func TestGetSetDel(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		ctx := context.Background()
		if v, ok := mustGet(t, s, "missing"); ok || v != nil {
			t.Fatalf("Get(missing) = %q, %v; want nothing", v, ok)
		}
		mustSet(t, s, "k", "v1", 0)
		mustSet(t, s, "k", "v2", 0)
		if v, ok := mustGet(t, s, "k"); !ok || string(v) != "v2" {
			t.Fatalf("Get(k) = %q, %v; want v2 (Set overwrites)", v, ok)
		}
		mustSet(t, s, "empty", "", 0)
		if v, ok := mustGet(t, s, "empty"); !ok || len(v) != 0 {
			t.Fatalf("Get(empty) = %q, %v; want an empty value that exists", v, ok)
		}
		binary := []byte{0, 0xff, '\n', 0x80}
		if err := s.Set(ctx, "bin", binary, 0); err != nil {
			t.Fatal(err)
		}
		if v, _ := mustGet(t, s, "bin"); !bytes.Equal(v, binary) {
			t.Fatalf("Get(bin) = %x, want %x", v, binary)
		}
		if err := s.Del(ctx, "k", "empty", "never-existed"); err != nil {
			t.Fatalf("Del: %v", err)
		}
		if err := s.Del(ctx); err != nil {
			t.Fatalf("Del with no keys: %v", err)
		}
		for _, k := range []string{"k", "empty"} {
			if _, ok := mustGet(t, s, k); ok {
				t.Fatalf("Get(%q) after Del: still there", k)
			}
		}
		if _, ok := mustGet(t, s, "bin"); !ok {
			t.Fatal("Del removed a key it was not given")
		}
	})
}

func TestSetNX(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		if !mustSetNX(t, s, "lock", "owner1", time.Minute) {
			t.Fatal("SetNX on a new key: false, want true")
		}
		if mustSetNX(t, s, "lock", "owner2", time.Minute) {
			t.Fatal("SetNX on an existing key: true, want false")
		}
		if v, _ := mustGet(t, s, "lock"); string(v) != "owner1" {
			t.Fatalf("Get(lock) = %q, want owner1 (a losing SetNX changes nothing)", v)
		}

		const ttl = 300 * time.Millisecond
		mustSetNX(t, s, "short", "a", ttl)
		b.Await(t, ttl, "SetNX key expires", func() bool { _, ok := mustGet(t, s, "short"); return !ok })
		if !mustSetNX(t, s, "short", "b", ttl) {
			t.Fatal("SetNX after expiry: false, want true")
		}
	})
}

func TestTTL(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		const ttl = 300 * time.Millisecond
		mustSet(t, s, "k", "v", ttl)
		mustSet(t, s, "forever", "v", 0)
		mustSet(t, s, "negative", "v", -time.Second) // no expiry, not Redis's KEEPTTL
		// Set without TTL replaces an earlier TTL.
		mustSet(t, s, "cleared", "v", ttl)
		mustSet(t, s, "cleared", "v", 0)
		if _, ok := mustGet(t, s, "k"); !ok {
			t.Fatal("Get before expiry: missing")
		}
		if b.Clock != nil {
			b.Clock.Advance(ttl - time.Nanosecond)
			if _, ok := mustGet(t, s, "k"); !ok {
				t.Fatal("Get 1ns before expiry: missing")
			}
			b.Clock.Advance(time.Nanosecond)
		}
		b.Await(t, ttl, "key expires", func() bool { _, ok := mustGet(t, s, "k"); return !ok })
		for _, k := range []string{"forever", "negative", "cleared"} {
			if _, ok := mustGet(t, s, k); !ok {
				t.Fatalf("Get(%q): expired, want no expiry", k)
			}
		}
	})
}

func TestIncr(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		for want := int64(1); want <= 3; want++ {
			if n := mustIncr(t, s, "count", 0); n != want {
				t.Fatalf("Incr = %d, want %d", n, want)
			}
		}
		// Counters read back as decimal text from both implementations.
		if v, _ := mustGet(t, s, "count"); string(v) != "3" {
			t.Fatalf("Get(count) = %q, want \"3\"", v)
		}
		mustSet(t, s, "text", "abc", 0)
		if _, err := s.Incr(context.Background(), "text", 0); !errors.Is(err, ErrNotInteger) {
			t.Fatalf("Incr on text: %v, want ErrNotInteger", err)
		}
		mustSet(t, s, "max", "9223372036854775807", 0)
		if _, err := s.Incr(context.Background(), "max", 0); !errors.Is(err, ErrNotInteger) {
			t.Fatalf("Incr past MaxInt64: %v, want ErrNotInteger", err)
		}
	})
}

func TestIncrTTLIsSetOnCreate(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		const ttl = 300 * time.Millisecond
		// A later Incr's TTL does not move the expiry of an existing key...
		mustIncr(t, s, "long", time.Hour)
		if n := mustIncr(t, s, "long", time.Millisecond); n != 2 {
			t.Fatalf("second Incr = %d, want 2", n)
		}
		b.Stays(t, 50*time.Millisecond, "key created with a 1h TTL exists", func() bool {
			_, ok := mustGet(t, s, "long")
			return ok
		})
		// ...and the TTL given at creation does apply.
		mustIncr(t, s, "short", ttl)
		mustIncr(t, s, "short", time.Hour)
		b.Await(t, ttl, "counter expires", func() bool { _, ok := mustGet(t, s, "short"); return !ok })
		if n := mustIncr(t, s, "short", ttl); n != 1 {
			t.Fatalf("Incr after expiry = %d, want 1 (a new counter)", n)
		}
	})
}

func TestPrefixIsolation(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		s1, s2 := open(t, b, "one:"), open(t, b, "two:")
		key := "iso-" + testenv.RandomSuffix()
		mustSet(t, s1, key, "v", time.Minute)
		if _, ok := mustGet(t, s2, key); ok {
			t.Fatal("a key set under one prefix is visible under another")
		}
		mustIncr(t, s1, "n", time.Minute)
		if n := mustIncr(t, s2, "n", time.Minute); n != 1 {
			t.Fatalf("counter under the second prefix = %d, want 1", n)
		}
		if err := s2.Del(ctx, key); err != nil {
			t.Fatal(err)
		}
		if _, ok := mustGet(t, s1, key); !ok {
			t.Fatal("Del under one prefix removed the key under another")
		}

		// In Redis, every key lives under the prefix, which the stores
		// sharing the connection read (KeyPrefix).
		c, ok := RedisClient(s1)
		if !ok {
			if p := KeyPrefix(s1); p != "" {
				t.Fatalf("KeyPrefix of the memory store = %q, want none", p)
			}
			return
		}
		if n := c.Exists(ctx, key).Val(); n != 0 {
			t.Fatalf("unprefixed key %q exists", key)
		}
		p1 := b.Prefix + "one:"
		if n := c.Exists(ctx, p1+key).Val(); n != 1 {
			t.Fatalf("prefixed key %q missing", p1+key)
		}
		if p := KeyPrefix(s1); p != p1 {
			t.Fatalf("KeyPrefix = %q, want %q", p, p1)
		}
	})
}

func TestRedisClient(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		c, ok := RedisClient(s)
		if ok != (b.Clock == nil) || ok != (c != nil) {
			t.Fatalf("RedisClient(%s) = %v, %v", b.Name, c, ok)
		}
		if ok {
			if err := c.Ping(context.Background()).Err(); err != nil {
				t.Fatalf("ping through the shared client: %v", err)
			}
		}
		if err := s.Ping(context.Background()); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	})
}
