package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"gatehouse/internal/periodic"
)

// The process's live heap is small: about ten MiB with Redis (nonces,
// rate-limit windows, sessions and throttles are in Redis; the app cache
// has a fixed number of entries), a little more with the in-process store
// (about 24 bytes per nonce remembered), while a signed request allocates 10 to
// 14 KB. At Go's default target (GOGC 100: collect when the heap has grown
// by as much as is live) the collector then starts a cycle every few MiB,
// several times a second under load.
//
// So the collector may let the heap reach a target before it collects
// while the live heap is small: the GC percent is (target - live) / live,
// between Go's default (100) and maxGCPercent (400), recomputed every
// gcTuneEvery from the live heap the last cycle measured. A small heap is
// collected up to a quarter as often; a heap of half the target or more is
// collected exactly as by default (as the in-process store's nonces pile up
// at a high request rate), so the extra memory is bounded by the target
// whatever the load. The target is 64 MiB with Redis and 24 MiB with the
// in-process store, the small single-machine deployment, whose whole
// process stays under 100 MiB of resident memory in the benchmarks (90
// with 24 MiB, 96 with 32).
//
// GOGC in the environment (Go's own setting) turns this off; GOMEMLIMIT
// applies either way.
const (
	redisHeapTarget  = 64 << 20
	memoryHeapTarget = 24 << 20
	maxGCPercent     = 400
	baseGCPercent    = 100
)

// gcTuneEvery is how often the GC percent follows the live heap.
var gcTuneEvery = time.Second

// gcPercentFor is the GC percent for a live heap of live bytes and a heap
// target of target bytes.
func gcPercentFor(live, target uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	if live >= target {
		return baseGCPercent
	}
	p := (target - live) * 100 / live
	return int(min(max(p, baseGCPercent), maxGCPercent))
}

// heapTarget is the heap the collector may reach while little is live.
func heapTarget(redisURL string) uint64 {
	if redisURL != "" {
		return redisHeapTarget
	}
	return memoryHeapTarget
}

// tuneGC starts the collector's tuning unless GOGC is set, until ctx ends,
// and returns the GC percent in effect now.
func tuneGC(ctx context.Context, redisURL string) int {
	if _, set := os.LookupEnv("GOGC"); set {
		p := debug.SetGCPercent(baseGCPercent)
		debug.SetGCPercent(p)
		return p
	}
	target := heapTarget(redisURL)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	start := gcPercentFor(live[0].Value.Uint64(), target)
	debug.SetGCPercent(start)
	cur := start // only the job below uses it after this
	go periodic.Run(ctx, gcTuneEvery, func(context.Context) {
		metrics.Read(live)
		if p := gcPercentFor(live[0].Value.Uint64(), target); p != cur {
			debug.SetGCPercent(p)
			cur = p
		}
	})
	return start
}
