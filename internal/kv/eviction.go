package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// NoEviction is the only Redis maxmemory-policy under which security
// state (nonces, the token deny-list, used authorization codes) cannot be
// forgotten to make room: Redis refuses writes when full instead.
const NoEviction = "noeviction"

// MaxmemoryPolicy reports the Redis server's maxmemory-policy, read from
// INFO (which managed services that disable CONFIG still answer); on a
// cluster, the first master's whose policy is not noeviction, if any. ok is
// false for the in-process store, which never evicts.
func MaxmemoryPolicy(ctx context.Context, s Store) (policy string, ok bool, err error) {
	r, isRedis := s.(*redisStore)
	if !isRedis {
		return "", false, nil
	}
	ctx, cancel := call(ctx)
	defer cancel()
	var mu sync.Mutex
	policy = NoEviction
	err = Masters(ctx, r.c, func(ctx context.Context, m redis.Cmdable) error {
		info, err := m.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, found := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); found {
				mu.Lock()
				if v != NoEviction {
					policy = v
				}
				mu.Unlock()
				return nil
			}
		}
		return errNoPolicy
	})
	switch {
	case errors.Is(err, errNoPolicy):
		return "", true, err
	case err != nil:
		return "", true, wrap("info memory", err)
	}
	return policy, true, nil
}

var errNoPolicy = errors.New("kv: INFO memory has no maxmemory_policy")

// EvictionError is a Redis whose policy may evict keys.
type EvictionError struct{ Policy string }

func (e *EvictionError) Error() string {
	return fmt.Sprintf("Redis maxmemory-policy is %q: under memory pressure Redis would evict nonces, "+
		"the token deny-list and used authorization codes, so replays and logged-out tokens would be accepted again. "+
		"Set maxmemory-policy to noeviction (CONFIG SET maxmemory-policy noeviction, or in redis.conf), "+
		"or set GATEHOUSE_REDIS_ALLOW_EVICTION=true to accept the risk", e.Policy)
}
