package kv

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
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

// TestMemoryNonceOwnsItsBytes checks that a remembered nonce is a copy. A
// nonce parsed from a request points into the request line; keeping that
// string as the map key kept the whole line alive for the nonce TTL, which
// under load was most of the embedded process's live heap.
func TestMemoryNonceOwnsItsBytes(t *testing.T) {
	t.Parallel()
	s := newMemory(options{now: time.Now})
	t.Cleanup(func() { _ = s.Close() })
	line := "GET /api/v1/orders?app_key=k&nonce=n0nce-1234&sign=0123456789abcdef HTTP/1.1"
	start := strings.Index(line, "n0nce")
	nonce := line[start : start+len("n0nce-1234")]
	if _, err := s.Admit(context.Background(), AdmitRequest{App: "app", Nonce: nonce, NonceTTL: time.Minute, Verified: true, Limit: 5, Window: time.Second}); err != nil {
		t.Fatal(err)
	}
	lineStart := uintptr(unsafe.Pointer(unsafe.StringData(line)))
	sh := s.shard("app")
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for k := range sh.apps["app"].nonces {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(k))); p >= lineStart && p < lineStart+uintptr(len(line)) {
			t.Fatalf("the remembered nonce %q shares the request line's bytes", k)
		}
	}
}
