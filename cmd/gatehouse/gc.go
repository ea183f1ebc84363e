package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"gatehouse/internal/periodic"
)

// With Redis as the kv store the process keeps no state that grows with
// traffic (nonces, rate-limit windows, sessions and throttles are in
// Redis; the app cache has a fixed number of entries): its live heap stays
// near ten MiB while a signed request allocates about 14 KB. At Go's
// default target (GOGC 100: collect when the heap has grown by as much as
// is live) the collector then starts a cycle every few MiB, some ten times a
// second under load, and takes close to a tenth of the process's CPU.
//
// So, with Redis, the collector may let garbage reach gcHeapTarget before
// it collects while the live heap is small: the GC percent is
// (gcHeapTarget - live) / live, between Go's default (100) and
// maxGCPercent (400), recomputed every gcTuneEvery from the live heap the
// last cycle measured. A small heap is collected a quarter as often; a
// heap of half the target or more is collected exactly as by default, so
// the extra memory is bounded by gcHeapTarget whatever the load.
//
// The in-process store keeps every nonce on the heap for five minutes, so
// there the heap grows with the request rate and Go's default stays. GOGC
// (and GOMEMLIMIT) in the environment are Go's own settings and win in
// both cases.
const (
	gcHeapTarget  = 64 << 20
	maxGCPercent  = 400
	baseGCPercent = 100
)

// gcTuneEvery is how often the GC percent follows the live heap.
var gcTuneEvery = time.Second

// gcPercentFor is the GC percent for a live heap of live bytes.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	if live >= gcHeapTarget {
		return baseGCPercent
	}
	p := (gcHeapTarget - live) * 100 / live
	return int(min(max(p, baseGCPercent), maxGCPercent))
}

// tuneGC starts the collector's tuning when it applies (Redis, GOGC not
// set), until ctx ends, and returns the GC percent in effect now.
func tuneGC(ctx context.Context, redisURL string) int {
	if _, set := os.LookupEnv("GOGC"); set || redisURL == "" {
		p := debug.SetGCPercent(baseGCPercent)
		debug.SetGCPercent(p)
		return p
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	start := gcPercentFor(live[0].Value.Uint64())
	debug.SetGCPercent(start)
	cur := start // only the job below uses it after this
	go periodic.Run(ctx, gcTuneEvery, func(context.Context) {
		metrics.Read(live)
		if p := gcPercentFor(live[0].Value.Uint64()); p != cur {
			debug.SetGCPercent(p)
			cur = p
		}
	})
	return start
}
