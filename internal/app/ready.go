package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"gatehouse/internal/httpx"
	"gatehouse/internal/kv"
)

// checkEviction refuses a Redis whose maxmemory-policy may evict keys,
// unless GATEHOUSE_REDIS_ALLOW_EVICTION says the operator accepts it. A
// Redis that cannot be reached now does not stop the start (the process
// may come up before Redis): /readyz then reports the policy once it can.
func (a *App) checkEviction(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	policy, isRedis, err := kv.MaxmemoryPolicy(ctx, a.KV)
	switch {
	case !isRedis:
		return nil
	case err != nil:
		a.Log.Warn("could not read Redis maxmemory-policy at start; /readyz reports it once Redis answers", "err", err)
		return nil
	case policy == kv.NoEviction:
		return nil
	case a.Cfg.Redis.AllowEviction:
		a.Log.Warn("Redis may evict keys (GATEHOUSE_REDIS_ALLOW_EVICTION=true): under memory pressure nonces, the token deny-list and used authorization codes can be forgotten", "maxmemory_policy", policy)
		return nil
	}
	return &kv.EvictionError{Policy: policy}
}

// readyBudget is the time each of /readyz's checks (database, key-value
// store) has, on its own: a frozen database must not make the store's
// check time out, nor the other way round.
const readyBudget = 2 * time.Second

// ready answers 200 when the database answers, the key-value store accepts
// writes (on every master: a demoted master answering READONLY, a cluster
// answering MOVED or CLUSTERDOWN fail it like an unreachable one) and cannot
// evict security state (or the operator allowed it). Both checks run at
// once, each with its own budget. With Redis it names the
// maxmemory-policy; it always shows the replay memory's start.
func (a *App) ready(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{}
	var dbErr, kvErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(r.Context(), readyBudget)
		defer cancel()
		dbErr = a.DB.Ping(ctx)
	})
	var kvState, policy string
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(r.Context(), readyBudget)
		defer cancel()
		kvState, policy, kvErr = a.kvReadiness(ctx)
	})
	wg.Wait()
	status := http.StatusOK
	checks["database"] = "ok"
	if dbErr != nil {
		checks["database"] = "unavailable"
		status = http.StatusServiceUnavailable
		a.Log.WarnContext(r.Context(), "readiness: database", "err", dbErr)
	}
	checks["kv"] = kvState
	if kvState != "ok" {
		status = http.StatusServiceUnavailable
		a.Log.WarnContext(r.Context(), "readiness: key-value store", "state", kvState, "err", kvErr)
	}
	if policy != "" {
		checks["kv_maxmemory_policy"] = policy
	}
	if start := kv.ReplayStart(a.KV); !start.IsZero() {
		checks["replay_memory_start"] = start.UTC().Format(time.RFC3339Nano)
	}
	if a.draining.Load() {
		checks["status"] = "shutting_down"
		status = http.StatusServiceUnavailable
	}
	if r.Context().Err() == nil { // not a check cut short by a stop or a client
		observeReadiness(dbErr == nil, kvState == "ok", status == http.StatusOK)
		a.readyCheckedAt.Store(time.Now().UnixNano())
	}
	httpx.WriteJSON(w, status, checks)
}

// Readiness as /readyz last found it (at start, at every probe of the load
// balancer or orchestrator, and at least every readyRefresh without one),
// for the readiness alert.
var (
	readyGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_ready",
		Help: "1 when the last /readyz check (at start, at every probe, and every 5 s without one) answered 200, else 0.",
	})
	readyCheckGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatehouse_ready_check",
		Help: "1 when the last /readyz check found this dependency (database, kv) ready, else 0.",
	}, []string{"check"})
)

func observeReadiness(db, kvOK, ready bool) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	readyCheckGauge.WithLabelValues("database").Set(b(db))
	readyCheckGauge.WithLabelValues("kv").Set(b(kvOK))
	readyGauge.Set(b(ready))
}

// readyRefresh is how often the readiness gauges are refreshed without
// any probe: they must not keep an old "ready" while nobody calls /readyz
// (a replica behind no load balancer, or whose balancer stopped probing).
const readyRefresh = 5 * time.Second

// checkReadiness runs /readyz's checks once, so that the readiness gauges
// mean something before the first probe.
func (a *App) checkReadiness(ctx context.Context) {
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/readyz", nil)
	a.ready(discardWriter{header: http.Header{}}, r)
}

// refreshReadiness runs the checks every readyRefresh unless a probe (or
// the last refresh) ran them more recently, until ctx ends.
func (a *App) refreshReadiness(ctx context.Context) {
	t := time.NewTicker(readyRefresh / 5)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, a.readyCheckedAt.Load())) >= readyRefresh {
			a.checkReadiness(ctx)
		}
	}
}

// discardWriter is a ResponseWriter that drops the reply.
type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header       { return d.header }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// kvReadiness is the key-value store's state for /readyz: "ok",
// "unavailable" (no answer), "refuses_writes" (an answer that refuses the
// probe's write), or "evicting"; and, with Redis, its maxmemory-policy
// ("unknown" when it could not be read).
func (a *App) kvReadiness(ctx context.Context) (state, policy string, err error) {
	if err := a.KV.Ping(ctx); err != nil {
		if kv.WriteRefused(err) {
			return "refuses_writes", "", err
		}
		return "unavailable", "", err
	}
	policy, isRedis, err := kv.MaxmemoryPolicy(ctx, a.KV)
	switch {
	case !isRedis:
		return "ok", "", nil
	case err != nil:
		return "unavailable", "unknown", err
	case policy != kv.NoEviction && !a.Cfg.Redis.AllowEviction:
		// Changed since start: this replica must not take traffic.
		return "evicting", policy, nil
	}
	return "ok", policy, nil
}
