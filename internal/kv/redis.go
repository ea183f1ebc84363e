package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gatehouse/internal/errs"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
)

// Bounded timeouts: the signed-request gate must fail fast (503) rather than
// hold requests while Redis is away.
const (
	dialTimeout = time.Second
	ioTimeout   = 500 * time.Millisecond
	poolTimeout = time.Second
	// poolSize is the connection pool's size (per node on a cluster)
	// unless the URL sets pool_size.
	poolSize = 40
	// callBudget caps one call end to end (pool wait, dial, write, read),
	// whatever the caller's context says.
	callBudget = time.Second
)

// CallBudget is callBudget, for the stores built on this connection
// (internal/partner/admitstore), which bound their calls by it too.
const CallBudget = callBudget

// incrScript sets the TTL only when INCR created the key, in one round trip.
var incrScript = redis.NewScript(`
local v = redis.call('INCR', KEYS[1])
if v == 1 and tonumber(ARGV[1]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return v
`)

// decrScript decrements only a counter that exists: DECR on a missing
// key would create it, without a TTL.
var decrScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('DECR', KEYS[1])
end
return 0
`)

// redisStore is the Store shared by all replicas.
type redisStore struct {
	c        redis.UniversalClient
	topology Topology
	prefix   string
}

// RedisClient returns the client under a Redis store, so that tests and
// tools can reach the same server(s). It reports false for the memory store.
func RedisClient(s Store) (redis.UniversalClient, bool) {
	r, ok := s.(*redisStore)
	if !ok {
		return nil, false
	}
	return r.c, true
}

// KeyPrefix is the prefix of every key of s ([WithPrefix]), for the stores
// that share its Redis connection; "" for the memory store.
func KeyPrefix(s Store) string {
	if r, ok := s.(*redisStore); ok {
		return r.prefix
	}
	return ""
}

// TopologyOf reports the Redis topology under s, or "" for the memory store.
func TopologyOf(s Store) Topology {
	if r, ok := s.(*redisStore); ok {
		return r.topology
	}
	return ""
}

func openRedis(ctx context.Context, rawURL string, o options) (*redisStore, error) {
	quietRedisLogs()
	c, topology, err := newRedisClient(rawURL, o.rootCAs)
	if err != nil {
		return nil, fmt.Errorf("kv: invalid Redis URL: %w", safeURLError(err))
	}
	if o.tracer != nil {
		// Spans name the command, never its arguments (keys hold app
		// keys and nonces, values session data).
		if err := redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(o.tracer),
			redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("kv: Redis tracing: %w", err)
		}
	}
	return &redisStore{c: c, topology: topology, prefix: o.prefix}, nil
}

// call bounds one operation by callBudget (or the caller's earlier deadline).
func call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callBudget)
}

// unavailableReplies are the server replies meaning the store cannot serve
// now (loading, failover, out of memory, misconfigured credentials), as
// opposed to a bad command.
var unavailableReplies = []string{
	"LOADING", "READONLY", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN",
	"NOREPLICAS", "OOM", "MISCONF", "NOAUTH", "WRONGPASS", "NOPERM",
	// A redirection left over after go-redis's own redirects (a cluster
	// being resharded, or a cluster node behind a single-node URL).
	"MOVED", "ASK",
}

// WrapRedis is wrap, for the stores that share the connection: they
// translate their errors as the key-value store does.
func WrapRedis(op string, err error) error { return wrap(op, err) }

// wrap translates a go-redis error once, at the storage boundary: anything
// short of a normal server reply is errs.Unavailable (the cause, such as
// context.Canceled, stays reachable with errors.Is).
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		for _, p := range unavailableReplies {
			if strings.HasPrefix(msg, p) {
				return fmt.Errorf("%w: %w %s: %w", errs.Unavailable, errs.KV, op, err)
			}
		}
		return fmt.Errorf("kv: %s: %w", op, err)
	}
	return fmt.Errorf("%w: %w %s: %w", errs.Unavailable, errs.KV, op, err)
}

// Ping writes a short-lived probe key on every master (probe.go): a
// master that answers but refuses writes (a demoted one answering
// READONLY, a cluster node answering MOVED or CLUSTERDOWN) cannot serve.
func (s *redisStore) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*callBudget)
	defer cancel()
	return s.probe(ctx)
}

func (s *redisStore) Close() error {
	if err := s.c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("kv: close: %w", err)
	}
	return nil
}

// ttlArg maps "no expiry" to 0: go-redis reads a negative expiration as
// KEEPTTL, which would silently keep an old TTL.
func ttlArg(ttl time.Duration) time.Duration { return max(ttl, 0) }

func (s *redisStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	// SET NX rather than SETNX: one command, with the TTL, atomically.
	res, err := s.c.SetArgs(ctx, s.prefix+key, value, redis.SetArgs{Mode: "NX", TTL: ttlArg(ttl)}).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, wrap("setnx", err)
	}
	return res == "OK", nil
}

func (s *redisStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	ctx, cancel := call(ctx)
	defer cancel()
	return wrap("set", s.c.Set(ctx, s.prefix+key, value, ttlArg(ttl)).Err())
}

func (s *redisStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	v, err := s.c.Get(ctx, s.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wrap("get", err)
	}
	return v, true, nil
}

func (s *redisStore) Del(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil // DEL without keys is a syntax error
	}
	ctx, cancel := call(ctx)
	defer cancel()
	if len(keys) == 1 {
		return wrap("del", s.c.Del(ctx, s.prefix+keys[0]).Err())
	}
	// One DEL per key: on a cluster the keys may live in different slots
	// (one DEL naming several would fail with CROSSSLOT); the pipeline
	// still takes one round trip per node.
	cmds, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, s.prefix+k)
		}
		return nil
	})
	if err != nil {
		return wrap("del", err)
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return wrap("del", err)
		}
	}
	return nil
}

func (s *redisStore) Incr(ctx context.Context, key string, ttl time.Duration) (int64, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	ms := int64(0)
	if ttl > 0 {
		ms = max(ttl.Milliseconds(), 1)
	}
	n, err := incrScript.Run(ctx, s.c, []string{s.prefix + key}, ms).Int64()
	if err != nil {
		var reply redis.Error
		if errors.As(err, &reply) && (strings.Contains(reply.Error(), "not an integer") || strings.Contains(reply.Error(), "overflow")) {
			return 0, ErrNotInteger
		}
		return 0, wrap("incr", err)
	}
	return n, nil
}

func (s *redisStore) Decr(ctx context.Context, key string) error {
	ctx, cancel := call(ctx)
	defer cancel()
	if err := decrScript.Run(ctx, s.c, []string{s.prefix + key}).Err(); err != nil {
		var reply redis.Error
		if errors.As(err, &reply) && (strings.Contains(reply.Error(), "not an integer") || strings.Contains(reply.Error(), "overflow")) {
			return ErrNotInteger
		}
		return wrap("decr", err)
	}
	return nil
}
