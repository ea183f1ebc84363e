package admitstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/kv/kvtest"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
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
		app := "app" + strconv.Itoa(i)
		for j := range 10 {
			if _, err := s.Admit(ctx, AdmitRequest{App: app, Nonce: strconv.Itoa(j), NonceTTL: time.Minute, Verified: true, Limit: 5, Window: time.Second}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Nothing has expired yet: the sweep must keep everything.
	s.sweep()
	if apps, nonces := s.size(); apps != 100 || nonces != 1000 {
		t.Fatalf("before expiry: %d apps, %d nonces; want 100 and 1000", apps, nonces)
	}
	clock.Advance(time.Minute)
	s.sweep()
	if apps, nonces := s.size(); apps != 0 || nonces != 0 {
		t.Fatalf("after expiry: %d apps, %d nonces; want none", apps, nonces)
	}
	if n := s.nonceCount.Load(); n != 0 {
		t.Fatalf("after expiry: the replay memory counts %d nonces, want 0", n)
	}
}

// size counts what the store holds, expired or not.
func (s *memoryStore) size() (apps, nonces int) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		apps += len(sh.apps)
		for _, st := range sh.apps {
			nonces += len(st.nonces)
		}
		sh.mu.Unlock()
	}
	return apps, nonces
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

// TestNonceMemoryBound: a replay memory of 3 nonces refuses the fourth new
// signed request with partner.ErrNonceMemoryFull (a 503: never an eviction, so
// every remembered nonce is still a duplicate), still answers duplicates,
// and accepts new requests again once entries expire (clock moved).
func TestNonceMemoryBound(t *testing.T) {
	clk := testenv.NewClock(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := Open(context.Background(), openKV(t, "", ""), WithClock(clk.Now), WithNonceMemoryMax(3))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admit := func(app, nonce string) (Admission, error) {
		return s.Admit(context.Background(), AdmitRequest{App: app, Nonce: nonce, NonceTTL: 5 * time.Minute, Verified: true, Limit: 100, Window: time.Second})
	}
	for i, app := range []string{"a", "a", "b"} {
		if a, err := admit(app, fmt.Sprint("n", i)); err != nil || a.DuplicateNonce {
			t.Fatalf("nonce %d: %+v %v", i, a, err)
		}
	}
	if _, err := admit("c", "n9"); !errors.Is(err, partner.ErrNonceMemoryFull) || !errors.Is(err, errs.Unavailable) {
		t.Fatalf("fourth nonce: %v, want partner.ErrNonceMemoryFull (unavailable)", err)
	}
	if a, err := admit("a", "n0"); err != nil || !a.DuplicateNonce {
		t.Fatalf("a remembered nonce while full: %+v %v, want a duplicate", a, err)
	}
	clk.Advance(5*time.Minute + time.Second)
	if a, err := admit("c", "n9"); err != nil || a.DuplicateNonce {
		t.Fatalf("after the entries expired: %+v %v", a, err)
	}
}

// TestReplayFile: the first store on a data dir is complete from the
// beginning (nothing can have been used); Close saves the live nonces and
// the start; a store opened on the file finds them duplicates, keeps the
// start, and removes the file; a store opened after a process that did not
// save (its running mark left behind, as after kill -9) starts now.
func TestReplayFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay")
	clk := testenv.NewClock(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() Store {
		s, err := Open(context.Background(), openKV(t, "", ""), WithClock(clk.Now), WithReplayFile(path))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	admit := func(s Store, nonce string, ttl time.Duration) Admission {
		a, err := s.Admit(context.Background(), AdmitRequest{App: "app", Nonce: nonce, NonceTTL: ttl, Verified: true, Limit: 100, Window: time.Second, SignedAt: clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	s := open()
	start := s.ReplayStart()
	if !start.IsZero() {
		t.Fatalf("first start on a data dir: start %v, want none (the zero time: nothing was ever lost)", start)
	}
	admit(s, "long", 5*time.Minute)
	admit(s, "short", time.Second)
	clk.Advance(2 * time.Second)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	s = open()
	if a := admit(s, "long", 5*time.Minute); !a.DuplicateNonce {
		t.Fatalf("saved nonce after the restart: %+v", a)
	}
	if a := admit(s, "short", 5*time.Minute); a.DuplicateNonce {
		t.Fatal("an expired nonce was kept")
	}
	if got := s.ReplayStart(); !got.Equal(start) {
		t.Fatalf("start %v after a graceful restart, want %v", got, start)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("replay file still there after loading: %v", err)
	}
	// As after kill -9: no file but the running mark (s is still open), so
	// the memory starts now and an older request is refused.
	s2, err := Open(context.Background(), openKV(t, "", ""), WithClock(clk.Now), WithReplayFile(path))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	old := clk.Now().Add(-time.Second)
	a, err := s2.Admit(context.Background(), AdmitRequest{App: "app", Nonce: "long", NonceTTL: time.Minute, Verified: true, Limit: 100, Window: time.Second, SignedAt: old})
	if err != nil || !a.BeforeStart || !a.Start.Equal(clk.Now().Truncate(time.Millisecond)) {
		t.Fatalf("request signed before an unsaved restart: %+v %v", a, err)
	}
	_ = s.Close()
}

// TestReplayFileOverTheBound: a saved file holding more live nonces than
// the memory's bound (saved under a larger GATEHOUSE_NONCE_MEMORY_MAX, or
// edited) is not loaded in part: the memory starts now, so a request
// signed before is refused, and the memory holds nothing over its bound.
func TestReplayFileOverTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay")
	clk := testenv.NewClock(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(max int) Store {
		s, err := Open(context.Background(), openKV(t, "", ""), WithClock(clk.Now), WithReplayFile(path), WithNonceMemoryMax(max))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(1000)
	for i := range 60 {
		if _, err := s.Admit(context.Background(), AdmitRequest{App: fmt.Sprint("app", i%7), Nonce: fmt.Sprint("n", i), NonceTTL: 5 * time.Minute,
			Verified: true, Limit: 100, Window: time.Second, SignedAt: clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	s = open(50)
	defer s.Close()
	if n := s.(*memoryStore).nonceCount.Load(); n != 0 {
		t.Fatalf("%d nonces loaded under a bound of 50", n)
	}
	a, err := s.Admit(context.Background(), AdmitRequest{App: "app0", Nonce: "n0", NonceTTL: time.Minute, Verified: true, Limit: 100, Window: time.Second, SignedAt: clk.Now().Add(-2 * time.Second)})
	if err != nil || !a.BeforeStart {
		t.Fatalf("a request signed before the unused file: %+v %v, want refused as before the start", a, err)
	}
}
