package shed

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Early refusal (a controlled drop rate, after CoDel and PIE). Refusing
// only the requests that waited past the queue budget refuses them late:
// each has waited the budget and the backlog in front of it, and once a
// backlog has formed every request in it is past the budget, so the
// process refuses nearly everything until it has drained. Instead, while
// a standing queue exists, a share p of the arriving requests is refused
// at once, whatever their wait, and p is revised every Window so that the
// queue stays near its target: a refusal then costs its client the short
// queue of the moment, and the requests admitted are served within it.
const (
	// dropGain is the proportional step of p per window: (standing
	// queue − target) / target × dropGain.
	dropGain = 0.05
	// dropTrend is the step per window of the queue's change (in
	// targets): a queue that grows raises p before it is long.
	dropTrend = 0.1
	// dropUp and dropDown bound p's change per window, and dropQMax the
	// queue read (in targets: the budget is that many of them), so that
	// one window of a process descheduled for long does not swing p from
	// 0 to the top and back (measured on a shared machine: it did). Up
	// by 0.4 a window, not 0.2: at the onset of an overload p reaches the
	// share the core needs in two windows instead of four, and the
	// backlog built meanwhile is most of the refusals' p99 (quiet VM,
	// alternating builds: signed overload 0.70 and 0.74 of the goal's
	// 2xx with refusals' p99 136 and 131 ms, against 0.65 and 0.63 with
	// 161 and 150 ms; the ticket page's p99 41 and 49 ms against 51 and 52).
	dropUp, dropDown, dropQMax = 0.4, 0.1, DelayShare * dropTargetDiv
	// dropTargetDiv: the mean wait p holds is the limit's scheduling
	// delay target over this (a fifth of the queue budget: 10 ms of the
	// default 50): a refusal costs its client the queue of the moment.
	// On the quiet VM (make bench's ticket overload, alternating builds)
	// 10 ms served 0.79–0.89 of the goal's 2xx with refusals' p99 61–91
	// ms in four runs, 5 ms 0.58–0.79 with 55–110 ms in five: a lower
	// target refused more than the core needed and left it idle (a
	// quarter of CPU 0 unused in a profile of a 5 ms run).
	dropTargetDiv = 1
	// dropMax is the highest share refused early: some requests always
	// reach the limit, so that p keeps being measured against served work.
	dropMax = 0.95
	// dropForget: after this long without a revision (no requests), p
	// starts again from 0.
	dropForget = time.Second
	// dropMinQueue: p grows only while more requests than this wait at
	// once (the window's arrivals × their mean wait / its length, by
	// Little's law). A few closed-loop clients on a slow or shared CPU
	// wait too, but they cannot send more than they have in flight, and
	// refusing them frees nothing.
	dropMinQueue = 32
)

// dropper holds a Limit's early-refusal state.
type dropper struct {
	p       atomic.Uint64 // math.Float64bits of the share refused early
	waitSum atomic.Int64  // queue waits (ns) seen in the window
	waitN   atomic.Int64  // and their number
	waitCap atomic.Int64  // the waits, each at most Window (ns): see revise
	prev    float64       // the last window's queue, in targets (under Limit.mu)
	meanMs  atomic.Uint64 // the last window's mean wait (ms), math.Float64bits
	queue   atomic.Uint64 // and the requests waiting at once (Little), math.Float64bits
}

// observe records the queue wait of a request that was not refused
// early (known: the kernel told), one of a random 1 / every of those.
// They are a random 1 − p of the arrivals, so their mean wait is the
// arrivals' own; for the count of requests waiting at once (Little's
// law, in revise) each stands for every / (1 − p) arrivals.
func (d *dropper) observe(waited time.Duration, every int) {
	d.waitSum.Add(int64(waited))
	d.waitN.Add(1)
	d.waitCap.Add(int64(float64(min(waited, Window)) * float64(every) / (1 - d.share())))
}

// waiting is the last window's count of requests waiting at once.
func (d *dropper) waiting() float64 { return math.Float64frombits(d.queue.Load()) }

// share is the share of requests refused early now.
func (d *dropper) share() float64 { return math.Float64frombits(d.p.Load()) }

// drop reports whether to refuse a request early.
func (d *dropper) drop() bool {
	p := d.share()
	return p > 0 && rand.Float64() < p
}

// revise ends a window: the window's queue is the mean wait of its
// requests, measured against target; idle is whether the window was long
// past (no requests: p is forgotten). Not the least wait, as CoDel's
// standing queue: the run queue is no FIFO (a new connection's goroutine
// runs next, ahead of the others), so the least wait is near 0 while
// most requests wait.
func (d *dropper) revise(target, window time.Duration, idle bool) {
	sum, n, capped := d.waitSum.Swap(0), d.waitN.Swap(0), d.waitCap.Swap(0)
	if idle || n == 0 || target <= 0 || window <= 0 {
		d.p.Store(0)
		d.prev = 0
		d.queue.Store(0)
		return
	}
	q := float64(sum) / float64(n) / float64(target)
	// Requests waiting at once, on average over the window (Little's
	// law): each wait counts at most a window, as the part of a long wait
	// that fell in the window is at most that (a process descheduled for
	// longer than a window sees its few clients' waits all at once).
	queue := float64(capped) / float64(window)
	d.meanMs.Store(math.Float64bits(float64(sum) / float64(n) / 1e6))
	d.queue.Store(math.Float64bits(queue))
	p := nextDrop(d.share(), q, d.prev)
	if queue < dropMinQueue {
		p = min(p, d.share()) // a short queue, however slow: no step up
	}
	d.prev = q
	d.p.Store(math.Float64bits(p))
}

// nextDrop is p after a window whose standing queue was q targets (the
// last one's prev): a proportional-integral step, as PIE's, in [0, dropMax].
func nextDrop(p, q, prev float64) float64 {
	q, prev = min(q, dropQMax), min(prev, dropQMax)
	step := min(max(dropGain*(q-1)+dropTrend*(q-prev), -dropDown), dropUp)
	return min(max(p+step, 0), dropMax)
}
