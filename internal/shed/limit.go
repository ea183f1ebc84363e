// Package shed bounds the work each listener takes on. An adaptive
// concurrency limit admits a request or refuses it at once — before any
// database or key-value work — so that an offered load beyond what the
// process can serve is answered with cheap refusals instead of a run
// queue that grows until every client has given up (congestion collapse).
// docs/operations.md describes the algorithm and its settings.
package shed

import (
	"sync"
	"sync/atomic"
	"time"
)

// DelayShare: a Limit's target scheduling delay is the queue budget (the
// longest a request may wait before it starts) divided by DelayShare, so
// that the requests it admits seldom come near the budget.
const DelayShare = 5

// Window is how often a Limit revises its limit and its early-refusal
// share. 50 ms, not 100: in alternating runs on the quiet VM the signed
// overload's refusals had a p99 of 73 and 82 ms against 154 and 151 (its
// 2xx 64 and 70 ms against 162 and 154), the 2xx rate the same (0.70 and
// 0.78 of the goal against 0.80 and 0.71): a backlog is seen, and cut,
// sooner.
const Window = 50 * time.Millisecond

// delayQuantile is the quantile of a window's scheduling delays that is
// held to the target: most work, not the unlucky goroutine behind a GC
// pause, decides.
const delayQuantile = 0.9

// Adjustments of the limit at the end of a window.
const (
	// decrease multiplies the concurrency in use when the delay was past
	// its target (multiplicative decrease, as TCP and Vegas do).
	decrease = 0.8
	// increaseDiv: the limit grows by limit/increaseDiv (at least 1) per
	// window in which it was in use and the delay was within its target:
	// from the default minimum of 256 to 1024 in about 0.6 s.
	increaseDiv = 8
)

// Limit is an adaptive concurrency limit: at most Current() requests run
// at once; more are refused (TryAcquire false). Every Window it compares
// the process's scheduling delay (the time runnable goroutines waited for
// a CPU; its 90th percentile over the window) with a target: past it the
// limit drops to 0.8 × the concurrency in use; within it, and when the
// limit was used (a refusal, or three quarters of it in flight), it grows
// by an eighth. It never leaves [min, max]. The decision costs one read of
// runtime/metrics per window; a request costs a few atomic operations.
type Limit struct {
	min, max int64
	target   float64 // seconds
	meter    *delayMeter
	now      func() time.Time

	limit    atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64 // highest in flight in the window
	refused  atomic.Int64 // refusals in the window
	windowAt atomic.Int64 // UnixNano the window began
	busy     atomic.Bool  // the last window's delay was past the target
	mu       sync.Mutex   // one revision at a time
	early    dropper      // the share refused early (drop.go)
	secs     seconds      // requests and refusals per second (all.go)
}

// NewLimit returns a limit that starts at min and stays in [min, max],
// holding the scheduling delay to target.
func NewLimit(lo, hi int, target time.Duration) *Limit {
	lo = max(lo, 1)
	hi = max(hi, lo)
	l := &Limit{min: int64(lo), max: int64(hi), target: target.Seconds(), meter: newDelayMeter(), now: time.Now}
	l.limit.Store(int64(lo))
	l.windowAt.Store(l.now().UnixNano())
	return l
}

// Current is the limit now.
func (l *Limit) Current() int { return int(l.limit.Load()) }

// InFlight is the number of admitted requests not yet released.
func (l *Limit) InFlight() int { return int(l.inflight.Load()) }

// TryAcquire admits a request when fewer than the limit are in flight;
// an admitted request must be released (Release) when done.
func (l *Limit) TryAcquire() bool {
	n := l.inflight.Add(1)
	if n > l.limit.Load() {
		l.inflight.Add(-1)
		l.refused.Add(1)
		l.revise()
		return false
	}
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return true
}

// Release ends an admitted request.
func (l *Limit) Release() {
	l.inflight.Add(-1)
	l.revise()
}

// revise revises the limit when a window has ended (lazily, on a request:
// an idle process keeps its limit, which nothing uses).
func (l *Limit) revise() {
	now := l.now().UnixNano()
	if now-l.windowAt.Load() < int64(Window) || !l.mu.TryLock() {
		return
	}
	defer l.mu.Unlock()
	if now-l.windowAt.Load() < int64(Window) {
		return // revised meanwhile
	}
	span := time.Duration(now - l.windowAt.Load())
	l.windowAt.Store(now)
	l.early.revise(time.Duration(l.target*float64(time.Second)/dropTargetDiv), span, span >= dropForget)
	peak, refused := l.peak.Swap(l.inflight.Load()), l.refused.Swap(0)
	congested := l.meter.quantile(delayQuantile) > l.target
	l.busy.Store(congested)
	l.limit.Store(next(l.limit.Load(), peak, refused, congested, l.min, l.max))
}

// DropEarly reports whether to refuse a request at once: while a standing
// queue exists, a share of the arrivals is refused whatever its wait
// (drop.go). It also revises the limit when a window has ended — here, on
// every request, not only on releases and refusals of the limit: in a
// backlog nearly every request is refused, and a window revised only a
// second late would read as one without requests. Not counted among the
// limit's refusals: those say the limit was used and may grow; an early
// refusal says nothing of the limit.
func (l *Limit) DropEarly() bool {
	l.revise()
	return l.early.drop()
}

// SampleEvery: while the process is not congested, one request in
// SampleEvery asks the kernel how long it waited (a getsockopt: on a VM
// whose system calls are slow, 0.05–0.07 of the embedded signed query's
// ratio to its floor, asked of every request); while it is congested,
// every request does (its wait decides whether it is refused).
const SampleEvery = 8

// Observe records how long a request that was not refused early waited
// before it reached the middleware (known: the kernel could tell): the
// waits of the early share's revisions. every: this request stands for
// that many (1 while congested, when every request is read; SampleEvery
// otherwise).
func (l *Limit) Observe(waited time.Duration, known bool, every int) {
	if known {
		l.early.observe(waited, every)
	}
}

// Queued reports whether many requests waited at once in the last window
// (dropMinQueue or more, by Little's law: drop.go): a queue, not a few
// clients late on a slow or shared CPU.
func (l *Limit) Queued() bool { return l.early.waiting() >= dropMinQueue }

// EarlyShare is the share of arriving requests refused early now.
func (l *Limit) EarlyShare() float64 { return l.early.share() }

// Congested reports whether runnable work waited past the target in the
// last window: the process is short of CPU, not merely busy.
func (l *Limit) Congested() bool { return l.busy.Load() }

// next is the limit after a window: cur the limit, peak the highest
// concurrency of the window, refused its refusals, congested whether its
// scheduling delay was past the target; the result stays in [lo, hi].
func next(cur, peak, refused int64, congested bool, lo, hi int64) int64 {
	switch {
	case congested:
		cur = int64(float64(min(cur, peak)) * decrease)
	case refused > 0 || peak*4 >= cur*3:
		cur += max(1, cur/increaseDiv)
	}
	return min(max(cur, lo), hi)
}
