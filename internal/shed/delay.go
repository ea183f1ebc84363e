package shed

import (
	"math"
	"runtime/metrics"
	"sync"
)

// schedLatencies is the runtime's histogram of the time goroutines spent
// runnable before they ran: how long work waits for a CPU.
const schedLatencies = "/sched/latencies:seconds"

// delayMeter reads the scheduling delay of the process since its last
// read. On a saturated core every request waits in the run queue behind
// every other goroutine (the ones refusing requests included), whatever
// its route costs: this is the queue whose length an overload grows, and
// unlike a request's round-trip time it does not move with the mix of
// cheap and dear routes.
type delayMeter struct {
	mu     sync.Mutex
	sample []metrics.Sample
	prev   []uint64 // bucket counts at the last read
}

func newDelayMeter() *delayMeter {
	m := &delayMeter{sample: []metrics.Sample{{Name: schedLatencies}}}
	m.quantile(0.9) // the first read only sets the baseline
	return m
}

// quantile returns the q-quantile (0 < q < 1) of the scheduling delays
// recorded since the last call, in seconds (the upper bound of its
// bucket); 0 when none was recorded.
func (m *delayMeter) quantile(q float64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	metrics.Read(m.sample)
	if m.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0 // not provided by this runtime: no signal, no shedding on it
	}
	h := m.sample[0].Value.Float64Histogram()
	if len(m.prev) != len(h.Counts) {
		m.prev = make([]uint64, len(h.Counts))
		copy(m.prev, h.Counts)
		return 0
	}
	var total uint64
	for i, c := range h.Counts {
		total += c - m.prev[i]
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	out := 0.0
	for i, c := range h.Counts {
		seen += c - m.prev[i]
		if seen >= want {
			out = h.Buckets[i+1] // bucket i is [Buckets[i], Buckets[i+1])
			break
		}
	}
	copy(m.prev, h.Counts)
	if math.IsInf(out, 1) {
		out = h.Buckets[len(h.Buckets)-2]
	}
	return out
}
