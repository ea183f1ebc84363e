package audit

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Refused events are limited per API key: a key that is refused is
// recorded, but a key sending refused documents in a loop (each may name
// up to a hundred mutations) must not fill the table and hold the one
// SQLite writer. Each key may store RefusedBurst refused events at once,
// then RefusedPerMinute a minute; the rest are counted, not stored, and
// said in one WARN per key and minute.
const (
	RefusedBurst     = 200
	RefusedPerMinute = 60
	// refusedKeysMax bounds the keys remembered; past it, the buckets of
	// keys idle for a minute are dropped.
	refusedKeysMax = 10_000
)

// refusedSuppressed counts refused events not stored one by one.
var refusedSuppressed = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "gatehouse_audit_refused_suppressed_total",
	Help: "Refused admin audit events not stored because their API key exceeded its refused-event rate (each key is named in a WARN once a minute).",
})

func init() { prometheus.MustRegister(refusedSuppressed) }

// bucket is one key's allowance of refused events.
type bucket struct {
	tokens     float64
	last       time.Time
	suppressed int
	warned     time.Time
}

// refusedLimit holds the buckets of every key seen refused.
type refusedLimit struct {
	mu      sync.Mutex
	buckets map[int]*bucket
}

// take reports whether a refused event of key may be stored at now; when
// not, it returns the count to warn about (0: already warned this minute).
func (l *refusedLimit) take(key int, now time.Time) (ok bool, warn int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[int]*bucket{}
	}
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= refusedKeysMax {
			for k, old := range l.buckets {
				if now.Sub(old.last) > time.Minute {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: RefusedBurst, last: now}
		l.buckets[key] = b
	}
	b.tokens = min(RefusedBurst, b.tokens+now.Sub(b.last).Minutes()*RefusedPerMinute)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	b.suppressed++
	if now.Sub(b.warned) < time.Minute {
		return false, 0
	}
	n := b.suppressed
	b.suppressed, b.warned = 0, now
	return false, n
}

// admitRefused applies the per-key limit to a refused event e; false: e is
// not to be stored (it was counted, and warned about once a minute).
func (s *Service) admitRefused(ctx context.Context, e Event) bool {
	if e.Outcome != Refused {
		return true
	}
	ok, warn := s.refused.take(e.APIKeyID, s.opt.Now())
	if ok {
		return true
	}
	refusedSuppressed.Inc()
	if warn > 0 {
		s.log.WarnContext(ctx, "audit: an API key exceeds its rate of refused admin requests; its further refused events are counted, not stored one by one",
			"api_key_id", e.APIKeyID, "api_key_name", e.APIKeyName, "not_stored", warn,
			"burst", RefusedBurst, "per_minute", RefusedPerMinute)
	}
	return false
}
