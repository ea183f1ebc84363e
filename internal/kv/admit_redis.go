package kv

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/combine"
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

// admitCall is one Admit waiting for, or taking part in, a pipeline.
type admitCall struct {
	ctx  context.Context
	keys []string
	args []any
	res  []int64
	err  error
}

// maxAdmitBatch bounds the scripts of one pipeline.
const maxAdmitBatch = 64

// admitBudget bounds an Admit end to end, its wait for a pipeline included:
// a call queued behind a pipeline to a frozen Redis must not wait for that
// one's timeout and then for its own. With it a signed request answers 503
// within a second of Redis hanging, as a lone call (read timeout) does.
const admitBudget = 750 * time.Millisecond

// newAdmitCombiner gathers Admits that arrive while another is on its way to
// Redis into one pipeline (one write and one read for all of them; each
// script still runs atomically on its own). An Admit that finds none
// running is sent at once, alone.
func (s *redisStore) newAdmitCombiner() *combine.Combiner[*admitCall] {
	return combine.New(s.runAdmits, combine.Options[*admitCall]{
		Max:     maxAdmitBatch,
		Context: func(c *admitCall) context.Context { return c.ctx },
		Abandon: func(c *admitCall, err error) { c.err = err },
	})
}

// runAdmits runs a batch of Admits: one alone as a plain call, more in a
// pipeline bounded by the earliest deadline among them and callBudget.
func (s *redisStore) runAdmits(batch []*admitCall) {
	if s.onAdmitBatch != nil {
		s.onAdmitBatch(len(batch))
	}
	if len(batch) == 1 {
		c := batch[0]
		ctx, cancel := call(c.ctx)
		defer cancel()
		c.res, c.err = admitScript.Run(ctx, s.c, c.keys, c.args...).Int64Slice()
		return
	}
	bctx, bcancel := combine.BatchContext(batch, func(c *admitCall) context.Context { return c.ctx })
	defer bcancel()
	ctx, cancel := call(bctx)
	defer cancel()
	pipe := s.c.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = admitScript.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, c := range batch {
		c.res, c.err = cmds[i].Int64Slice()
		if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
			// Redis lost its scripts (restart, SCRIPT FLUSH): this one
			// did not run; Run loads the script with EVAL.
			c.res, c.err = admitScript.Run(ctx, s.c, c.keys, c.args...).Int64Slice()
		}
	}
}

func (s *redisStore) Admit(ctx context.Context, r AdmitRequest) (Admission, error) {
	if err := r.validate(); err != nil {
		return Admission{}, err
	}
	nonceKey, windowKey := s.admitKeys(r.App, r.Nonce)
	verified := "0"
	if r.Verified {
		verified = "1"
	}
	ctx, cancel := context.WithTimeout(ctx, admitBudget)
	defer cancel()
	c := &admitCall{
		ctx:  ctx,
		keys: []string{nonceKey, windowKey},
		args: []any{r.NonceTTL.Milliseconds(), verified, r.Limit, r.Window.Microseconds(), r.Nonce},
	}
	s.admits.Do(c)
	if c.err != nil {
		return Admission{}, wrap("admit", c.err)
	}
	res := c.res
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
