package kv

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
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
