package kv

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestMemorySweepBoundsMemory checks that expired state is actually
// dropped, not just hidden, so the memory store stays bounded.
func TestMemorySweepBoundsMemory(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newMemory(options{now: clock.Now})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()

	for i := range 100 {
		app := "app" + strconv.Itoa(i)
		for j := range 10 {
			if _, err := s.Admit(ctx, AdmitRequest{App: app, Nonce: strconv.Itoa(j), NonceTTL: time.Minute, Verified: true, Limit: 5, Window: time.Second}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Set(ctx, "tmp"+strconv.Itoa(i), []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set(ctx, "keep", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}

	// Nothing has expired yet: the sweep must keep everything.
	s.sweep()
	if items, apps := s.size(); items != 101 || apps != 100 {
		t.Fatalf("before expiry: %d items, %d apps; want 101 and 100", items, apps)
	}
	clock.Advance(time.Minute)
	s.sweep()
	if items, apps := s.size(); items != 1 || apps != 0 {
		t.Fatalf("after expiry: %d items, %d apps; want 1 (the key without TTL) and 0", items, apps)
	}
}

// size counts what the store holds, expired or not.
func (s *memoryStore) size() (items, apps int) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		items += len(sh.items)
		apps += len(sh.apps)
		sh.mu.Unlock()
	}
	return items, apps
}

// TestRing compares the ring with a plain slice through random pushes and
// drops, across growth and wrap-around.
func TestRing(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var r ring
	var model []int64
	now := int64(0)
	for step := range 10000 {
		limit := 1 + rng.IntN(40)
		if rng.IntN(3) > 0 && len(model) < limit {
			now += int64(rng.IntN(5))
			r.push(now, limit)
			model = append(model, now)
		} else {
			cutoff := now - int64(rng.IntN(20))
			r.dropUpTo(cutoff)
			for len(model) > 0 && model[0] <= cutoff {
				model = model[1:]
			}
		}
		if r.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, r.len(), len(model))
		}
		for i, v := range model {
			if r.at(i) != v {
				t.Fatalf("step %d: at(%d) = %d, want %d", step, i, r.at(i), v)
			}
		}
		if len(r.buf) > 40 {
			t.Fatalf("step %d: buffer grew to %d, beyond the largest limit", step, len(r.buf))
		}
	}
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

// TestMemoryNonceFootprint: the in-process store remembers every nonce of
// the last five minutes, so its cost per nonce bounds the embedded mode's
// memory under load. A 64-bit hashed key keeps it near 24 bytes; two
// hashes took 35, nonces kept as strings 67.
func TestMemoryNonceFootprint(t *testing.T) {
	const n = 200_000
	s := newMemory(options{now: time.Now})
	defer s.Close()
	nonces := make([]string, n)
	for i := range nonces {
		nonces[i] = "nonce-" + strconv.Itoa(i) + "-0123456789abcdef"
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, nonce := range nonces {
		// Limit 1: the window holds one entry, every nonce is recorded.
		if _, err := s.Admit(context.Background(), AdmitRequest{App: "app", Nonce: nonce, NonceTTL: 5 * time.Minute, Verified: true, Limit: 1, Window: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%.1f heap bytes per remembered nonce", per)
	if per > 32 {
		t.Errorf("%.0f heap bytes per remembered nonce, want at most 32", per)
	}
	// Every one of them is still a duplicate.
	for _, nonce := range []string{nonces[0], nonces[n/2], nonces[n-1]} {
		a, err := s.Admit(context.Background(), AdmitRequest{App: "app", Nonce: nonce, NonceTTL: 5 * time.Minute, Verified: true, Limit: 1, Window: time.Second})
		if err != nil || !a.DuplicateNonce {
			t.Fatalf("nonce %q again: %+v, %v; want a duplicate", nonce, a, err)
		}
	}
	runtime.KeepAlive(nonces)
}
