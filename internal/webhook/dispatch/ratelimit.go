package dispatch

import (
	"sync"
	"time"
)

// limiters hold one token bucket per endpoint with a rate limit: at most
// rate deliveries per second (bursts of up to rate) from this replica.
type limiters struct {
	mu sync.Mutex
	m  map[int]*bucket
}

type bucket struct {
	rate   int
	tokens float64
	at     time.Time
}

func newLimiters() *limiters { return &limiters{m: map[int]*bucket{}} }

// take takes a token of endpoint id's bucket (rate per second) at now, or
// says how long until one is there. rate 0: no limit.
func (l *limiters) take(id, rate int, now time.Time) (ok bool, wait time.Duration) {
	if rate <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[id]
	if b == nil || b.rate != rate {
		if len(l.m) > 100_000 {
			clear(l.m)
		}
		b = &bucket{rate: rate, tokens: float64(rate), at: now}
		l.m[id] = b
	}
	b.tokens = min(float64(rate), b.tokens+now.Sub(b.at).Seconds()*float64(rate))
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / float64(rate) * float64(time.Second))
}
