package admitstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/combine"
	"gatehouse/internal/kv"
)

// redisStore is the admission store shared by all replicas, on the
// key-value store's Redis connection and under its key prefix.
type redisStore struct {
	c      redis.UniversalClient
	prefix string
	admits *combine.Combiner[*admitCall] // pipelines concurrent Admits
	replay replayState                   // the replay memory's start (epoch.go)

	onAdmitBatch func(size int) // tests: called before each batch of Admits is sent
}

func openRedis(ctx context.Context, c redis.UniversalClient, prefix string, o options) *redisStore {
	s := &redisStore{c: c, prefix: prefix}
	s.admits = s.newAdmitCombiner()
	s.replay.init(o.now())
	// Record this moment as the start of any master's replay memory not
	// yet known, so that requests signed from now on are not refused as
	// older than a start found at their first admission. Redis may be down:
	// the admissions then find out for themselves.
	rctx, cancel := context.WithTimeout(ctx, 2*kv.CallBudget)
	defer cancel()
	_ = s.refreshReplayStart(rctx)
	return s
}

// Close does nothing: the connection is the key-value store's.
func (s *redisStore) Close() error { return nil }
