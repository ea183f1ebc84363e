package kv

import (
	"context"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/kv/kvtest"
)

// TestMemorySweepBoundsMemory checks that expired state is actually
// dropped, not just hidden, so the memory store stays bounded.
func TestMemorySweepBoundsMemory(t *testing.T) {
	t.Parallel()
	clock := kvtest.NewFakeClock()
	s := newMemory(options{now: clock.Now})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()

	for i := range 100 {
		if err := s.Set(ctx, "tmp"+strconv.Itoa(i), []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set(ctx, "keep", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}

	// Nothing has expired yet: the sweep must keep everything.
	s.sweep()
	if items := s.size(); items != 101 {
		t.Fatalf("before expiry: %d items; want 101", items)
	}
	clock.Advance(time.Minute)
	s.sweep()
	if items := s.size(); items != 1 {
		t.Fatalf("after expiry: %d items; want 1 (the key without TTL)", items)
	}
}

// size counts what the store holds, expired or not.
func (s *memoryStore) size() (items int) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		items += len(sh.items)
		sh.mu.Unlock()
	}
	return items
}

// TestMemoryValuesAreCopies guards against callers mutating stored state
// through the slices they pass in or get back.
func TestMemoryValuesAreCopies(t *testing.T) {
	t.Parallel()
	s := newMemory(options{now: time.Now})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	in := []byte("abc")
	if err := s.Set(ctx, "k", in, 0); err != nil {
		t.Fatal(err)
	}
	in[0] = 'X'
	out, _, _ := s.Get(ctx, "k")
	out[1] = 'Y'
	if again, _, _ := s.Get(ctx, "k"); string(again) != "abc" {
		t.Fatalf("stored value changed to %q", again)
	}
}
