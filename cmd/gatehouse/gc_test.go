package main

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The GC percent lets the heap reach its target while the live heap is
// small, never exceeds maxGCPercent, and is Go's default from half the
// target up.
func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	if heapTarget("redis://127.0.0.1:6379/0") != 64*mib || heapTarget("") != 24*mib {
		t.Fatalf("targets %d / %d MiB, want 64 with Redis, 24 in-process", heapTarget("redis://x")/mib, heapTarget("")/mib)
	}
	cases := []struct {
		live uint64
		want int
	}{
		{0, maxGCPercent},
		{4 * mib, maxGCPercent},      // 64/4 - 1 = 15x, capped
		{12800 * 1024, maxGCPercent}, // 12.5 MiB: exactly 4x
		{16 * mib, 300},              // collect at 64 MiB
		{32 * mib, baseGCPercent},    // half the target: Go's default
		{40 * mib, baseGCPercent},    // never below the default
		{redisHeapTarget * 3, baseGCPercent},
	}
	for _, c := range cases {
		if got := gcPercentFor(c.live, redisHeapTarget); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live/mib, got, c.want)
		}
	}
}

// The tuning runs on both stores, and never when GOGC is set.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(baseGCPercent)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	cases := []struct {
		name, redisURL, gogc string
		setEnv               bool
		tuned                bool
	}{
		{"redis", "redis://127.0.0.1:6379/0", "", false, true},
		{"in-process store", "", "", false, true},
		{"redis, GOGC set", "redis://127.0.0.1:6379/0", "150", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", c.gogc) // restored after the test
			if !c.setEnv {
				os.Unsetenv("GOGC")
			}
			debug.SetGCPercent(baseGCPercent) // the runtime read GOGC at start-up
			runtime.GC()                      // measure the live heap now
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := tuneGC(ctx, c.redisURL)
			if now := debug.SetGCPercent(baseGCPercent); now != got {
				t.Fatalf("tuneGC returned %d, the runtime has %d", got, now)
			}
			// A test binary's live heap is far below half the target.
			if c.tuned != (got > baseGCPercent) {
				t.Fatalf("GC percent %d; tuned: %v", got, c.tuned)
			}
		})
	}
}

// The running tuning follows the live heap: once half the target is live,
// the collector is back at Go's default.
func TestTuneGCFollowsTheLiveHeap(t *testing.T) {
	prev := debug.SetGCPercent(baseGCPercent)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	every := gcTuneEvery
	gcTuneEvery = 10 * time.Millisecond
	t.Cleanup(func() { gcTuneEvery = every })
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if p := tuneGC(ctx, "redis://127.0.0.1:6379/0"); p != maxGCPercent {
		t.Fatalf("GC percent %d at start, want %d", p, maxGCPercent)
	}
	live := make([]*[1 << 20]byte, redisHeapTarget/2>>20)
	for i := range live {
		live[i] = new([1 << 20]byte)
	}
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p == baseGCPercent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC percent still %d with %d MiB live", p, len(live))
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(live)
}
