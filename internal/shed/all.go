package shed

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Shedding every request. A listener sheds every request when, in each of
// the last AllSeconds whole seconds, at least AllMinRequests requests
// reached its limit (health checks on the reserve and requests whose
// client had gone are not counted) and it refused at least AllShare of
// them. Such a replica serves nothing: /readyz answers 503 so that a load
// balancer sends the work elsewhere, and the first whole second that falls
// short (fewer refusals, or fewer requests — the balancer took it out)
// makes it ready again.
const (
	AllShare       = 0.99
	AllSeconds     = 3
	AllMinRequests = 10
)

var sheddingAllGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Name: "gatehouse_http_shedding_all",
	Help: "1 while the listener sheds every request (≥ 99 % of at least 10 requests refused in each of the last 3 whole seconds; /readyz then answers 503), else 0.",
}, []string{"listener"})

// seconds counts a Limit's requests and refusals per second of its clock.
type seconds struct {
	sec     atomic.Int64 // the second being counted (Unix)
	seen    atomic.Int64 // its requests
	refused atomic.Int64 // and refusals
	mu      sync.Mutex   // closes a second
	last    int64        // the last closed second (under mu)
	lastN   [2]int64     // its requests and refusals (under mu)
	run     int          // closed seconds in a row, ending with last, that shed everything (under mu)
}

// count counts a request (refused or not) at second s; it reports whether
// a second was closed.
func (c *seconds) count(s int64, refused bool) bool {
	closed := c.advance(s)
	c.seen.Add(1)
	if refused {
		c.refused.Add(1)
	}
	return closed
}

// advance closes the seconds before s, if not yet done; it reports
// whether it closed one.
func (c *seconds) advance(s int64) bool {
	if c.sec.Load() >= s {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.sec.Load()
	if old >= s {
		return false
	}
	seen, refused := c.seen.Swap(0), c.refused.Swap(0)
	all := seen >= AllMinRequests && float64(refused) >= AllShare*float64(seen)
	switch {
	case !all:
		c.run = 0
	case old == c.last+1 && c.run > 0:
		c.run++
	default:
		c.run = 1
	}
	c.last, c.lastN = old, [2]int64{seen, refused}
	c.sec.Store(s)
	return true
}

// state reports, at second s, whether every request was shed in each of
// the last AllSeconds whole seconds, and the last whole second's requests
// and refusals (0 when nothing came in it).
func (c *seconds) state(s int64) (all bool, seen, refused int64) {
	c.advance(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != s-1 {
		return false, 0, 0 // the last second had no request
	}
	return c.run >= AllSeconds, c.lastN[0], c.lastN[1]
}

// Saturation is what a listener's limit refused in its last whole second.
type Saturation struct {
	// All: it shed every request for AllSeconds whole seconds (see
	// AllShare); the replica cannot serve.
	All bool
	// Seen and Refused are the requests that reached the limit in the
	// last whole second and those refused.
	Seen, Refused int64
}

// Saturation reports the listener's saturation now and sets
// gatehouse_http_shedding_all{listener}; the zero Saturation for a nil
// Limit (shedding off).
func (l *Limit) Saturation(listener string) Saturation {
	if l == nil {
		return Saturation{}
	}
	all, seen, refused := l.secs.state(l.now().Unix())
	v := 0.0
	if all {
		v = 1
	}
	sheddingAllGauge.WithLabelValues(listener).Set(v)
	return Saturation{All: all, Seen: seen, Refused: refused}
}

// countRequest counts a request that reached the limit, refused or not;
// when it closes a second, the gauge is brought up to date.
func (l *Limit) countRequest(listener string, refused bool) {
	if l.secs.count(l.now().Unix(), refused) {
		l.Saturation(listener)
	}
}
