package kv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/depstate"
)

// Health is the key-value store's state as a readiness check finds it.
type Health struct {
	State depstate.State
	// Detail says what is lost ("1 of 3 masters: …"), or is empty.
	Detail string
	// Policy is Redis's maxmemory-policy ("" for the memory store,
	// "unknown" when it could not be read).
	Policy string
	// Err is the check's error, if any.
	Err error
}

// HealthCheck is a further check of [CheckHealth], from a store that
// shares the key-value store's Redis connection.
type HealthCheck struct {
	Name string // the detail reported when it fails
	Run  func(ctx context.Context) error
}

// CheckHealth probes s with a write on every master (probe.go), each
// master on its own, and reports:
//   - ok: every master took the write (and, on a cluster, every slot is
//     served);
//   - degraded: some masters took it and others did not, or a cluster
//     serves fewer than all slots (a shard lost with
//     cluster-require-full-coverage no): requests whose keys live on the
//     rest are served; or a maxmemory-policy that may evict keys appeared
//     since start (allowEviction false);
//   - read-only: every master answered but refused the write (READONLY
//     from a demoted master, CLUSTERDOWN, OOM…);
//   - unavailable: none answered.
//
// Once the masters took the write, it runs checks, the further checks of
// the stores that share the connection (the admission store registers
// masters seen for the first time in its replay memory's registry): one
// that fails makes an ok store degraded, with the check's name as detail.
func CheckHealth(ctx context.Context, s Store, allowEviction bool, checks ...HealthCheck) Health {
	r, ok := s.(*redisStore)
	if !ok {
		if err := s.Ping(ctx); err != nil {
			return Health{State: depstate.Unavailable, Err: err}
		}
		return Health{State: depstate.OK}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*callBudget)
	defer cancel()
	h := r.probeMasters(ctx)
	if h.State == depstate.Unavailable || h.State == depstate.ReadOnly {
		return h
	}
	// A master lost with it may fail a check (the replay registry: the
	// others are still registered by the admissions themselves).
	for _, c := range checks {
		if err := c.Run(ctx); err != nil && h.State == depstate.OK {
			return Health{State: depstate.Degraded, Detail: c.Name, Err: err}
		}
	}
	policy, _, err := MaxmemoryPolicy(ctx, s)
	switch {
	case err != nil:
		h.Policy = "unknown"
	case policy != NoEviction:
		h.Policy = policy
		if !allowEviction && h.State == depstate.OK {
			// Changed since start: security state may be evicted.
			h.State, h.Detail = depstate.Degraded, "maxmemory-policy "+policy+" may evict nonces and revocations"
		}
	default:
		h.Policy = policy
	}
	return h
}

// probeMasters writes the probe key on each master and sums up the answers.
func (s *redisStore) probeMasters(ctx context.Context) Health {
	c, ok := s.c.(*redis.ClusterClient)
	if !ok {
		err := s.probe(ctx)
		switch {
		case err == nil:
			return Health{State: depstate.OK}
		case WriteRefused(err):
			return Health{State: depstate.ReadOnly, Err: err}
		}
		return Health{State: depstate.Unavailable, Err: err}
	}
	var mu sync.Mutex
	var masters, refused int
	var failed []error
	var live *redis.Client
	stamp := strconv.FormatInt(time.Now().UnixMilli(), 10)
	// ForEachMaster's own error is the first master's failure, which the
	// callback has recorded; a failure to load the cluster's layout at
	// all leaves masters at 0.
	layoutErr := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		key, err := s.localKey(ctx, m, "readyz")
		if err == nil {
			err = m.Set(ctx, key, stamp, probeTTL).Err()
		}
		mu.Lock()
		defer mu.Unlock()
		masters++
		if err != nil {
			failed = append(failed, fmt.Errorf("master %s: %w", m.Options().Addr, err))
			if WriteRefused(err) {
				refused++
			}
			return err
		}
		live = m
		return nil
	})
	switch {
	case masters == 0:
		return Health{State: depstate.Unavailable, Err: wrap("probe", layoutErr)}
	case len(failed) == masters && refused == masters:
		return Health{State: depstate.ReadOnly, Err: wrap("probe", errors.Join(failed...))}
	case len(failed) == masters:
		return Health{State: depstate.Unavailable, Err: wrap("probe", errors.Join(failed...))}
	case len(failed) > 0:
		return Health{State: depstate.Degraded, Detail: fmt.Sprintf("%d of %d masters fail", len(failed), masters),
			Err: wrap("probe", errors.Join(failed...))}
	}
	// Every master known took the write; a master the cluster has given
	// up on may no longer be among them, while its slots stay unserved.
	info, err := live.ClusterInfo(ctx).Result()
	if err != nil {
		return Health{State: depstate.Degraded, Detail: "cluster info", Err: wrap("probe", err)}
	}
	if ok, found := clusterField(info, "cluster_slots_ok"); found && ok < clusterSlots {
		return Health{State: depstate.Degraded, Detail: fmt.Sprintf("%d of %d slots not served", clusterSlots-ok, clusterSlots)}
	}
	return Health{State: depstate.OK}
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// clusterField is the integer field name of CLUSTER INFO's reply.
func clusterField(info, name string) (int, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, false
}
