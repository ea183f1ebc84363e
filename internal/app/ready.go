package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"entgo.io/ent/dialect"

	"gatehouse/internal/depstate"
	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
	"gatehouse/internal/kv"
	"gatehouse/internal/shed"
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

// ready answers whether this replica can serve: 503 only while it
// starts, drains or sheds every request of the public listener (shed.AllShare
// for shed.AllSeconds) (or, with GATEHOUSE_READY_REQUIRES, while a dependency named
// there is in any state but ok). A shared dependency failing must not take
// every replica out of its load balancer: the routes that do not need it
// keep serving, and those that do answer 503 on their own. The body gives
// each dependency's state (ok, degraded, unavailable, read-only, as
// depstate says) and what is lost, Redis's maxmemory-policy, and the replay
// memory's start once it has one. Both checks run at once, each with its
// own budget; their states go to the tracker (one ERROR per change) and
// the metrics.
func (a *App) ready(w http.ResponseWriter, r *http.Request) {
	var db, kvh kv.Health
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(r.Context(), readyBudget)
		defer cancel()
		db = a.databaseHealth(ctx)
	})
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(r.Context(), readyBudget)
		defer cancel()
		kvh = kv.CheckHealth(ctx, a.KV, a.Cfg.Redis.AllowEviction, a.Admission.HealthChecks()...)
	})
	wg.Wait()
	body := map[string]string{"database": string(db.State), "kv": string(kvh.State)}
	if db.Detail != "" {
		body["database_detail"] = db.Detail
	}
	if kvh.Detail != "" {
		body["kv_detail"] = kvh.Detail
	}
	if kvh.Policy != "" {
		body["kv_maxmemory_policy"] = kvh.Policy
	}
	if start := a.Admission.ReplayStart(); !start.IsZero() {
		body["replay_memory_start"] = start.UTC().Format(time.RFC3339Nano)
	}
	sat := a.Shed.Public.Saturation("public")
	a.Shed.Admin.Saturation("admin") // its gauge
	body["shedding"] = sheddingWord(sat)
	body["status"] = a.readyStatus(db, kvh, sat)
	status := http.StatusOK
	if body["status"] != "ready" {
		status = http.StatusServiceUnavailable
	}
	if r.Context().Err() == nil { // not a check cut short by a stop or a client
		ctx := context.WithoutCancel(r.Context())
		a.deps.Set(ctx, errs.Database, db.State, db.Detail, db.Err)
		a.deps.Set(ctx, errs.KV, kvh.State, kvh.Detail, kvh.Err)
		observeReadiness(db.State == depstate.OK, kvh.State == depstate.OK, status == http.StatusOK)
		a.readyCheckedAt.Store(time.Now().UnixNano())
	}
	httpx.WriteJSON(w, status, body)
}

// readyStatus is /readyz's status word: "ready", or why not.
func (a *App) readyStatus(db, kvh kv.Health, sat shed.Saturation) string {
	required, _ := a.Cfg.Server.ReadyRequired() // validated at start
	switch {
	case a.draining.Load():
		return "shutting_down"
	case !a.started.Load():
		return "starting"
	case sat.All:
		return "shedding_all"
	case required["database"] && db.State != depstate.OK:
		return "database_" + string(db.State)
	case required["kv"] && kvh.State != depstate.OK:
		return "kv_" + string(kvh.State)
	}
	return "ready"
}

// sheddingWord is /readyz's "shedding": "all" while the public listener
// sheds every request, "some" when its last whole second refused any,
// else "none".
func sheddingWord(sat shed.Saturation) string {
	switch {
	case sat.All:
		return "all"
	case sat.Refused > 0:
		return "some"
	}
	return "none"
}

// databaseHealth is the database's state: unavailable when it does not
// answer; on Postgres, read-only when it answers but is in recovery or
// refuses writes (a standby a pooler still points at after a failover).
func (a *App) databaseHealth(ctx context.Context) kv.Health {
	if a.DB.Dialect != dialect.Postgres {
		if err := a.DB.Ping(ctx); err != nil {
			return kv.Health{State: depstate.Unavailable, Err: err}
		}
		return kv.Health{State: depstate.OK}
	}
	var ro string
	if err := a.DB.SQL.QueryRowContext(ctx, "SHOW transaction_read_only").Scan(&ro); err != nil {
		return kv.Health{State: depstate.Unavailable, Err: err}
	}
	if ro == "on" {
		return kv.Health{State: depstate.ReadOnly, Detail: "transaction_read_only is on"}
	}
	return kv.Health{State: depstate.OK}
}

// Readiness as /readyz last found it (at start, at every probe of the load
// balancer or orchestrator, and at least every readyRefresh without one),
// for the readiness alert.
var (
	readyGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_ready",
		Help: "1 when the last /readyz check (at start, at every probe, and every 5 s without one) answered 200 (not starting, not draining, not shedding every request, and every dependency GATEHOUSE_READY_REQUIRES names ok), else 0.",
	})
	readyCheckGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatehouse_ready_check",
		Help: "1 when the last /readyz check found this dependency (database, kv) ok, else 0 (its state is in gatehouse_dependency_state).",
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

// recheckEvery bounds how often requests failing on a dependency believed
// ok trigger a readiness check of their own.
const recheckEvery = time.Second

// suspectDependency runs the readiness checks now, in the background, when
// a request failed on a dependency the last check found ok (at most once
// per recheckEvery): the state change is then logged within a second of
// the first failures rather than at the next probe.
func (a *App) suspectDependency() {
	if a.draining.Load() {
		return
	}
	last := a.recheckAt.Load()
	now := time.Now().UnixNano()
	if now-last < int64(recheckEvery) || !a.recheckAt.CompareAndSwap(last, now) {
		return
	}
	go a.checkReadiness(context.Background())
}
