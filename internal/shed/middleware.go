package shed

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"gatehouse/internal/httpx"
)

var shedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "gatehouse_http_shed_total",
	Help: "Requests refused by load shedding (503, before any database or key-value work), by listener; every listener's series exists at 0 from the start.",
}, []string{"listener"})

// Reserve admits at most its size of requests at once, beside a
// listener's Limit: the health checks and the admin listener keep it
// while the limit is full, so that an operator (and a load balancer) can
// still reach the process during an overload.
type Reserve struct {
	size     int64
	inflight atomic.Int64
}

// NewReserve returns a reserve of n concurrent requests.
func NewReserve(n int) *Reserve { return &Reserve{size: int64(max(n, 0))} }

func (r *Reserve) tryAcquire() bool {
	if r == nil {
		return false
	}
	if r.inflight.Add(1) > r.size {
		r.inflight.Add(-1)
		return false
	}
	return true
}

func (r *Reserve) release() { r.inflight.Add(-1) }

// Options configure the shedding of one listener.
type Options struct {
	// Listener names the listener in gatehouse_http_shed_total.
	Listener string
	// Limit bounds the listener's requests; nil: no limit (shedding off),
	// only requests whose client has gone are not started.
	Limit *Limit
	// Reserve admits the Reserved requests beyond the Limit; nil: none.
	Reserve *Reserve
	// Reserved reports whether a request may use the Reserve (health
	// checks); nil: none may.
	Reserved func(*http.Request) bool
	// QueueBudget is how long a request may have waited before reaching
	// the middleware (in the kernel's buffers and the run queue) and still
	// be started while the Limit is congested; 0: no bound. Reserved
	// requests are not held to it.
	QueueBudget time.Duration
	// Log receives the summary of the refusals, at most one WARN line a
	// second (the refused requests have no line of their own); nil: none.
	Log *slog.Logger
	// Refuse writes the 503 of a refused request in its route's error
	// shape, with Retry-After.
	Refuse func(http.ResponseWriter, *http.Request)
}

// Middleware admits each request to next within the listener's limit
// (or, for a reserved one, within the reserve first), refuses it at once
// otherwise or when it waited past the QueueBudget before it got here
// (Refuse, counted in gatehouse_http_shed_total), and does not
// start a request whose client has already gone: it is answered
// httpx.StatusClientClosed, which nobody reads, and logged as such. A
// client whose FIN has arrived counts as gone only while the process is
// congested: it may merely have half-closed its side and still read the
// answer (legal TCP, which some clients do after a request), and only
// under overload is a request more likely abandoned than half-closed. It
// must run before anything that touches the database or the key-value
// store.
func Middleware(o Options) func(http.Handler) http.Handler {
	shed := shedTotal.WithLabelValues(o.Listener) // exists at 0 from the start
	sheddingAllGauge.WithLabelValues(o.Listener).Set(0)
	sum := &summary{log: o.Log, listener: o.Listener, limit: o.Limit}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if httpx.ClientGone(r) {
				w.WriteHeader(httpx.StatusClientClosed)
				return
			}
			if o.Limit == nil {
				next.ServeHTTP(w, r)
				return
			}
			refuse := func() {
				o.Limit.countRequest(o.Listener, true)
				shed.Inc()
				httpx.MarkShed(r.Context())
				sum.refused()
				o.Refuse(w, r)
			}
			reserved := o.Reserved != nil && o.Reserved(r)
			// An early refusal is drawn first: it needs nothing of the
			// kernel, and during an overload it is most requests (the
			// waits are sampled from the others, drawn at random alike).
			if !reserved && o.Limit.DropEarly() {
				refuse()
				return
			}
			// The kernel is asked about every request while congested
			// (gone, stale), and about a sample of them otherwise (the
			// waits of the early share's revisions).
			congested := o.Limit.Congested()
			var st connState
			every := 1
			if !congested {
				every = SampleEvery
			}
			if congested || rand.Uint32()%SampleEvery == 0 {
				st = stateOf(r.Context())
			}
			if st.gone && congested {
				w.WriteHeader(httpx.StatusClientClosed)
				return
			}
			if reserved && o.Reserve.tryAcquire() {
				defer o.Reserve.release()
				next.ServeHTTP(w, r)
				return
			}
			o.Limit.Observe(st.waited, st.known, every)
			if o.stale(st) || !o.Limit.TryAcquire() {
				refuse()
				return
			}
			o.Limit.countRequest(o.Listener, false)
			defer o.Limit.Release()
			serve(next, w, r) // on a pooled goroutine: run.go
		})
	}
}

// stale reports whether a request waited past the queue budget while the
// process is congested and many requests wait at once. All three: a
// single late request (the process was descheduled a moment, a
// closed-loop client's request came in behind the others) is no
// overload, and refusing it would only make its client retry; a queue
// that keeps work waiting is. Congestion alone is not such a queue: on a
// machine whose other processes take the CPU, every goroutine of a few
// clients' requests waits past the target too, and refusing them frees
// nothing (a rolling restart's four clients got a 503 so on a loaded
// machine).
func (o Options) stale(st connState) bool {
	return o.QueueBudget > 0 && st.waited > o.QueueBudget && o.Limit.Congested() && o.Limit.Queued()
}

// RetryAfter is the Retry-After, in seconds, of a refusal: about the
// time a limit takes to adapt (a few windows).
const RetryAfter = "1"

// summary logs the refusals of a listener at most once a second.
type summary struct {
	log      *slog.Logger
	listener string
	limit    *Limit
	count    atomic.Int64
	loggedAt atomic.Int64 // UnixNano of the last line
}

// summaryEvery is the least time between two summary lines.
const summaryEvery = time.Second

// refused counts a refusal and, when the last line is a second old or
// more, writes one with the refusals since (counted from the previous
// line: a burst's last refusals wait for the next burst's first line;
// gatehouse_http_shed_total has them all at once).
func (s *summary) refused() {
	s.count.Add(1)
	if s.log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := s.loggedAt.Load()
	if now-last < int64(summaryEvery) || !s.loggedAt.CompareAndSwap(last, now) {
		return
	}
	n := s.count.Swap(0)
	s.log.Warn("load shedding: requests refused (503) since the last line", "listener", s.listener, "refused", n,
		"limit", s.limit.Current(), "in_flight", s.limit.InFlight(), "congested", s.limit.Congested(),
		"early_share", s.limit.EarlyShare(), "wait_ms", math.Float64frombits(s.limit.early.meanMs.Load()),
		"waiting", s.limit.early.waiting())
}
