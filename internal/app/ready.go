package app

import (
	"context"
	"errors"
	"net/http"
	"time"

	"gatehouse/internal/errs"
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

// ready answers 200 when the database and the key-value store answer and
// the store cannot evict security state (or the operator allowed it). With
// Redis it names the maxmemory-policy.
func (a *App) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "kv": "ok"}
	status := http.StatusOK
	if a.draining.Load() {
		checks["status"] = "shutting_down"
		status = http.StatusServiceUnavailable
	}
	if err := a.DB.Ping(ctx); err != nil {
		checks["database"] = "unavailable"
		status = http.StatusServiceUnavailable
	}
	if err := a.KV.Ping(ctx); err != nil {
		checks["kv"] = "unavailable"
		status = http.StatusServiceUnavailable
	}
	policy, isRedis, err := kv.MaxmemoryPolicy(ctx, a.KV)
	switch {
	case !isRedis:
	case err != nil:
		checks["kv_maxmemory_policy"] = "unknown"
		if !errors.Is(err, errs.Unavailable) {
			status = http.StatusServiceUnavailable
		}
	default:
		checks["kv_maxmemory_policy"] = policy
		if policy != kv.NoEviction && !a.Cfg.Redis.AllowEviction {
			// Changed since start: this replica must not take traffic.
			checks["kv"] = "evicting"
			status = http.StatusServiceUnavailable
		}
	}
	httpx.WriteJSON(w, status, checks)
}
