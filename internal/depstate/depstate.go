// Package depstate keeps the state of the service's shared dependencies
// (the database and the key-value store) as the readiness checks find it,
// and turns an outage into few log lines: one ERROR when a dependency
// changes state (down, degraded, read-only, back) and, while requests are
// refused for want of one, one summary line a second with counts, instead
// of a line per refused request (a killed Redis master once wrote 57,176
// ERROR lines in 5 s from two replicas).
package depstate

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"gatehouse/internal/errs"
)

// State is what a dependency can do now.
type State string

// The states a dependency is reported in (/readyz, metrics, logs).
const (
	// OK: it answers and takes writes.
	OK State = "ok"
	// Degraded: part of it serves (a Redis Cluster with shards or nodes
	// lost; a Redis whose maxmemory-policy may evict keys): the requests
	// whose keys live on the lost part fail, the others are served.
	Degraded State = "degraded"
	// Unavailable: it does not answer.
	Unavailable State = "unavailable"
	// ReadOnly: it answers but refuses writes (a demoted Redis master
	// answering READONLY, a Postgres in recovery).
	ReadOnly State = "read-only"
)

// States lists every state, for the gauge.
var States = []State{OK, Degraded, Unavailable, ReadOnly}

// The dependencies tracked.
var Dependencies = []errs.Dependency{errs.Database, errs.KV}

// stateGauge is 1 for each dependency's current state and 0 for the others.
var stateGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Name: "gatehouse_dependency_state",
	Help: "1 for the state (ok, degraded, unavailable, read-only) the last readiness check found each dependency (database, kv) in, 0 for the others.",
}, []string{"dependency", "state"})

// SummaryEvery is how often, at most, the refused requests are summed up
// in one log line.
const SummaryEvery = time.Second

// Tracker holds the dependencies' states and the requests refused since
// the last summary. Its zero value is not usable: call New.
type Tracker struct {
	log *slog.Logger

	mu      sync.Mutex
	states  map[errs.Dependency]State
	refused map[errs.Dependency]int64 // since the last summary
	lastErr string                    // one of them, for the summary
	suspect func()                    // see OnSuspect
}

// New is a Tracker logging to log, with every state unknown until Set.
func New(log *slog.Logger) *Tracker {
	return &Tracker{log: log, states: map[errs.Dependency]State{}, refused: map[errs.Dependency]int64{}}
}

// OnSuspect sets f, called (without the lock, possibly often: f must
// return at once and rate-limit itself) when a request fails on a
// dependency the tracker believes ok, so that its state is checked now
// rather than at the next readiness check.
func (t *Tracker) OnSuspect(f func()) {
	t.mu.Lock()
	t.suspect = f
	t.mu.Unlock()
}

// State is dep's state as last set, "" before the first check.
func (t *Tracker) State(dep errs.Dependency) State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.states[dep]
}

// Set records dep's state as a readiness check found it. A change is
// logged once, at ERROR (with detail and the check's error); the first
// state found is logged only when it is not ok.
func (t *Tracker) Set(ctx context.Context, dep errs.Dependency, s State, detail string, err error) {
	t.mu.Lock()
	prev := t.states[dep]
	t.states[dep] = s
	t.mu.Unlock()
	for _, st := range States {
		v := 0.0
		if st == s {
			v = 1
		}
		stateGauge.WithLabelValues(string(dep), string(st)).Set(v)
	}
	if prev == s || prev == "" && s == OK {
		return
	}
	attrs := []any{"dependency", string(dep), "state", string(s)}
	if prev != "" {
		attrs = append(attrs, "was", string(prev))
	}
	if detail != "" {
		attrs = append(attrs, "detail", detail)
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	t.log.ErrorContext(ctx, "dependency state changed", attrs...)
}

// Refused records a request answered 503 because dep (errs.DependencyOf
// its error; "" when it names none) did not serve it. Nothing is logged
// now: Flush sums the refusals up.
func (t *Tracker) Refused(dep errs.Dependency, err error) {
	if dep == "" {
		dep = "other"
	}
	t.mu.Lock()
	t.refused[dep]++
	if err != nil {
		t.lastErr = err.Error()
	}
	suspect := t.suspect
	ok := t.states[dep] == OK || t.states[dep] == ""
	t.mu.Unlock()
	if ok && suspect != nil {
		suspect()
	}
}

// Flush logs, at WARN, one line with the requests refused since the last
// Flush per dependency and the text of one of their errors; nothing when
// there were none.
func (t *Tracker) Flush(ctx context.Context) {
	t.mu.Lock()
	if len(t.refused) == 0 {
		t.mu.Unlock()
		return
	}
	attrs := make([]any, 0, 2*len(t.refused)+4)
	var total int64
	for _, dep := range slices.Sorted(maps.Keys(t.refused)) {
		attrs = append(attrs, "refused_"+string(dep), t.refused[dep])
		total += t.refused[dep]
	}
	attrs = append(attrs, "refused", total, "last_err", t.lastErr)
	clear(t.refused)
	t.lastErr = ""
	t.mu.Unlock()
	t.log.WarnContext(ctx, "requests refused: a dependency did not serve them", attrs...)
}

// Run flushes every SummaryEvery until ctx ends, then once more.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTicker(SummaryEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			t.Flush(context.WithoutCancel(ctx))
			return
		case <-tick.C:
			t.Flush(ctx)
		}
	}
}
