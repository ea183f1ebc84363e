package kv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounded timeouts: the signed-request gate must fail fast (503) rather than
// hold requests while Redis is away.
const (
	dialTimeout = time.Second
	ioTimeout   = 500 * time.Millisecond
	poolTimeout = time.Second
	// callBudget caps one call end to end (pool wait, dial, write, read),
	// whatever the caller's context says.
	callBudget = time.Second
)

// admitScript is Admit in one round trip. Running as one script makes the
// nonce check, nonce record, window count and window add atomic across
// replicas. The window uses the server's clock (TIME, in microseconds), so
// replicas with skewed clocks still agree.
//
// KEYS[1] nonce key, KEYS[2] window sorted set
// ARGV[1] nonce TTL (ms), ARGV[2] "1" when verified, ARGV[3] limit,
// ARGV[4] window (µs), ARGV[5] nonce
// Returns {duplicate, limited, remaining, retry after (µs)}.
var admitScript = redis.NewScript(`
if ARGV[2] ~= '1' then
  return {redis.call('EXISTS', KEYS[1]), 0, 0, 0}
end
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return {1, 0, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[2])
if n >= limit then
  -- Normally the oldest entry; after the limit was lowered, the one whose
  -- departure brings the count below the limit.
  local e = redis.call('ZRANGE', KEYS[2], n - limit, n - limit, 'WITHSCORES')
  return {0, 1, 0, tonumber(e[2]) + window - now}
end
-- The member is built from TIME's strings (Lua would print a large number
-- in exponent form); with the nonce, just recorded as new, it is unique.
redis.call('ZADD', KEYS[2], now, t[1] .. '.' .. t[2] .. ':' .. ARGV[5])
redis.call('PEXPIRE', KEYS[2], math.ceil(window / 1000))
return {0, 0, limit - n - 1, 0}
`)

// incrScript sets the TTL only when INCR created the key, in one round trip.
var incrScript = redis.NewScript(`
local v = redis.call('INCR', KEYS[1])
if v == 1 and tonumber(ARGV[1]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return v
`)

// redisStore is the Store shared by all replicas.
type redisStore struct {
	c      *redis.Client
	prefix string
}

// RedisClient returns the client under a Redis store, so that other
// libraries (sessions) can share its connection pool and timeouts. It
// reports false for the memory store.
func RedisClient(s Store) (*redis.Client, bool) {
	r, ok := s.(*redisStore)
	if !ok {
		return nil, false
	}
	return r.c, true
}

func openRedis(_ context.Context, rawURL string, o options) (*redisStore, error) {
	quietRedisLogs()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		// url.Parse errors quote the whole URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("kv: invalid Redis URL: %w", err)
	}
	// Settings given in the URL's query win; otherwise fail fast.
	if opt.DialTimeout == 0 {
		opt.DialTimeout = dialTimeout
	}
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = ioTimeout
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = ioTimeout
	}
	if opt.PoolTimeout == 0 {
		opt.PoolTimeout = poolTimeout
	}
	if opt.DialerRetries == 0 {
		// go-redis dials up to 5 times with backoff by default, which would
		// stretch "Redis is down" to several seconds per call.
		opt.DialerRetries = 1
	}
	if opt.MaxRetries == 0 {
		// No command retries: a retried Admit whose first attempt did run
		// (reply lost to a timeout) would call its own nonce a duplicate.
		// Callers get ErrUnavailable at once and decide.
		opt.MaxRetries = -1
	}
	opt.ContextTimeoutEnabled = true
	return &redisStore{c: redis.NewClient(opt), prefix: o.prefix}, nil
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
}

// wrap translates a go-redis error once, at the storage boundary: anything
// short of a normal server reply is ErrUnavailable (the cause, such as
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
				return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
			}
		}
		return fmt.Errorf("kv: %s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

func (s *redisStore) Ping(ctx context.Context) error {
	ctx, cancel := call(ctx)
	defer cancel()
	return wrap("ping", s.c.Ping(ctx).Err())
}

func (s *redisStore) Close() error {
	if err := s.c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("kv: close: %w", err)
	}
	return nil
}

// admitKeys returns the nonce key and the window key of an app. The app's
// length goes into the key so that no (app, nonce) pair can spell another.
func (s *redisStore) admitKeys(app, nonce string) (string, string) {
	base := s.prefix + "admit:" + strconv.Itoa(len(app)) + ":" + app
	return base + ":n:" + nonce, base + ":w"
}

func (s *redisStore) Admit(ctx context.Context, r AdmitRequest) (Admission, error) {
	if err := r.validate(); err != nil {
		return Admission{}, err
	}
	ctx, cancel := call(ctx)
	defer cancel()
	nonceKey, windowKey := s.admitKeys(r.App, r.Nonce)
	verified := "0"
	if r.Verified {
		verified = "1"
	}
	res, err := admitScript.Run(ctx, s.c, []string{nonceKey, windowKey},
		r.NonceTTL.Milliseconds(), verified, r.Limit, r.Window.Microseconds(), r.Nonce).Int64Slice()
	if err != nil {
		return Admission{}, wrap("admit", err)
	}
	if len(res) != 4 {
		return Admission{}, fmt.Errorf("kv: admit: unexpected script reply %v", res)
	}
	return Admission{
		DuplicateNonce: res[0] == 1,
		Limited:        res[1] == 1,
		Limit:          r.Limit,
		Remaining:      int(res[2]),
		RetryAfter:     time.Duration(res[3]) * time.Microsecond,
	}, nil
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
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = s.prefix + k
	}
	return wrap("del", s.c.Del(ctx, full...).Err())
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
