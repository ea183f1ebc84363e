package kv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/kv/kvtest"
)

// TestUnavailable checks that every operation on a store that cannot be
// reached fails with errs.Unavailable, promptly.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stores := []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"redis refused", func(t *testing.T) Store {
			// Port 1 on loopback: nothing listens, the dial is refused.
			return mustOpen(t, "redis://127.0.0.1:1")
		}},
		{"redis hung", func(t *testing.T) Store { return mustOpen(t, kvtest.HungServer(t)) }},
		{"redis closed", func(t *testing.T) Store {
			s := mustOpen(t, "redis://127.0.0.1:1")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"memory closed", func(t *testing.T) Store {
			s := mustOpen(t, "")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	ops := []struct {
		name string
		call func(s Store) error
	}{
		{"Ping", func(s Store) error { return s.Ping(ctx) }},
		{"SetNX", func(s Store) error { _, err := s.SetNX(ctx, "k", nil, 0); return err }},
		{"Set", func(s Store) error { return s.Set(ctx, "k", nil, 0) }},
		{"Get", func(s Store) error { _, _, err := s.Get(ctx, "k"); return err }},
		{"Del", func(s Store) error { return s.Del(ctx, "k") }},
		{"Incr", func(s Store) error { _, err := s.Incr(ctx, "k", 0); return err }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.open(t)
			for _, op := range ops {
				start := time.Now()
				err := op.call(s)
				elapsed := time.Since(start)
				if !errors.Is(err, errs.Unavailable) {
					t.Errorf("%s: got %v, want errs.Unavailable", op.name, err)
				}
				// The budget is 1s; allow for a loaded test machine.
				if elapsed > 1500*time.Millisecond {
					t.Errorf("%s: took %v, want about 1s at most", op.name, elapsed)
				}
			}
		})
	}
}

// TestCanceledContext checks that a call honours its context on both
// backends and reports the cause.
func TestCanceledContext(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := open(t, b, "")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := s.Get(ctx, "k")
		if !errors.Is(err, errs.Unavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Get with a canceled context: %v, want errs.Unavailable and context.Canceled", err)
		}
	})
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"http://user:s3cret@127.0.0.1:6379",
		"redis://user:s3cret@127.0.0.1:port/0",
		"redis://user:s3cret@127.0.0.1:6379/notadb",
	} {
		_, err := Open(context.Background(), url)
		if err == nil {
			t.Errorf("Open(%q): no error", url)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): error %q reveals the password", url, err)
		}
	}
}

func mustOpen(t *testing.T, url string) Store {
	t.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
