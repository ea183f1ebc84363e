package admitstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/combine"
	"gatehouse/internal/errs"
	"gatehouse/internal/kv"
	"gatehouse/internal/partner"
)

// admitScript is Admit in one round trip. Running as one script makes the
// replay memory's start check, the nonce check, nonce record, window count
// and window add atomic across replicas. The window uses the server's clock
// (TIME, in microseconds), so replicas with skewed clocks still agree.
//
// KEYS[1] nonce key, KEYS[2] window sorted set, KEYS[3] epoch key (epoch.go)
// ARGV[1] nonce TTL (ms), ARGV[2] "1" when verified, ARGV[3] limit,
// ARGV[4] window (µs), ARGV[5] nonce, ARGV[6] signing time (ms) or "",
// ARGV[7] and ARGV[8] the start to record for a missing epoch key and the
// run_id it is for (or "").
// Returns {epoch state, start (ms), run_id or "", then the call's outcome:
// duplicate (2: signed before the start), limited, remaining, retry after (µs)}.
var admitScript = redis.NewScript(withEpoch(`
local start, state, rid = epoch(KEYS[3], ARGV[7], ARGV[8])
local r = ''
if state ~= 0 then r = rid end
if state == 2 then
  return {state, 0, r, 0, 0, 0, 0}
end
if ARGV[6] ~= '' and tonumber(ARGV[6]) < start then
  return {state, start, r, 2, 0, 0, 0}
end
if ARGV[2] ~= '1' then
  return {state, start, r, redis.call('EXISTS', KEYS[1]), 0, 0, 0}
end
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return {state, start, r, 1, 0, 0, 0}
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
  return {state, start, r, 0, 1, 0, tonumber(e[2]) + window - now}
end
-- The member is built from TIME's strings (Lua would print a large number
-- in exponent form); with the nonce, just recorded as new, it is unique.
redis.call('ZADD', KEYS[2], now, t[1] .. '.' .. t[2] .. ':' .. ARGV[5])
redis.call('PEXPIRE', KEYS[2], math.ceil(window / 1000))
return {state, start, r, 0, 0, limit - n - 1, 0}
`))

// admitManyScript is admitScript for several Admits of one app (one window,
// one limit) in one call, in the order given: what admitScript does for
// each, with one epoch check, one TIME, one trim, one count, one ZADD and
// one PEXPIRE for all of them. KEYS: the window, the epoch key, then each
// call's nonce key. ARGV: limit, window (µs), the start to record for a
// missing epoch key and its run_id, then per call its nonce TTL (ms),
// verified ('1' or not), nonce and signing time (ms or ”). The reply is
// the epoch state, start and run_id, then each call's four integers, one
// after the other. The calls of a pipeline that share an app go through
// it: the script's cost in Redis (about five times a SET NX) is then paid
// once per group, not once per request.
var admitManyScript = redis.NewScript(withEpoch(`
local w = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local start, state, rid = epoch(KEYS[2], ARGV[3], ARGV[4])
local r = ''
if state ~= 0 then r = rid end
local out = {state, start, r}
if state == 2 then
  for i = 3, #KEYS do
    table.insert(out, 0); table.insert(out, 0); table.insert(out, 0); table.insert(out, 0)
  end
  return out
end
local t, now, n, stamp
local members = {}
for i = 3, #KEYS do
  local a = 5 + (i - 3) * 4
  local nk = KEYS[i]
  if ARGV[a + 3] ~= '' and tonumber(ARGV[a + 3]) < start then
    table.insert(out, 2); table.insert(out, 0); table.insert(out, 0); table.insert(out, 0)
  elseif ARGV[a + 1] ~= '1' then
    table.insert(out, redis.call('EXISTS', nk)); table.insert(out, 0); table.insert(out, 0); table.insert(out, 0)
  elseif not redis.call('SET', nk, '1', 'NX', 'PX', ARGV[a]) then
    table.insert(out, 1); table.insert(out, 0); table.insert(out, 0); table.insert(out, 0)
  else
    if not t then
      t = redis.call('TIME')
      now = tonumber(t[1]) * 1000000 + tonumber(t[2])
      stamp = t[1] .. '.' .. t[2] .. ':'
      redis.call('ZREMRANGEBYSCORE', w, '-inf', now - window)
      n = redis.call('ZCARD', w)
    end
    if n >= limit then
      -- The entry whose departure brings the count below the limit, in
      -- time order; this call's admitted predecessors come last (now).
      local idx = n - limit
      local score = now
      if idx < n - #members / 2 then
        score = tonumber(redis.call('ZRANGE', w, idx, idx, 'WITHSCORES')[2])
      end
      table.insert(out, 0); table.insert(out, 1); table.insert(out, 0); table.insert(out, score + window - now)
    else
      table.insert(members, now); table.insert(members, stamp .. ARGV[a + 2])
      n = n + 1
      table.insert(out, 0); table.insert(out, 0); table.insert(out, limit - n); table.insert(out, 0)
    end
  end
end
if #members > 0 then
  redis.call('ZADD', w, unpack(members))
  redis.call('PEXPIRE', w, math.ceil(window / 1000))
end
return out
`))

// admitKeys returns the nonce, window and epoch keys of an app. The app
// is the keys' hash tag, so that on a cluster every key a script names
// lives in one slot (whatever the prefix holds: the first "{" of the key
// and the first "}" after it are in the part every key of the app
// shares). The app's length goes into the key so that no (app, nonce) pair
// can spell another.
func (s *redisStore) admitKeys(app, nonce string) (nonceKey, windowKey, epochKey string) {
	base := s.prefix + "admit:{" + strconv.Itoa(len(app)) + ":" + app + "}"
	return base + ":n:" + nonce, base + ":w", base + ":e"
}

// admitCall is one Admit waiting for, or taking part in, a pipeline.
type admitCall struct {
	ctx    context.Context
	keys   []string // nonce key, window key, epoch key
	args   []any    // nonce TTL (ms), verified, limit, window (µs), nonce, signed at (ms or ""), init start, init run_id
	limit  int
	window int64 // µs
	state  int64 // epoch state (epoch.go)
	start  int64 // ms
	rid    string
	res    []int64 // duplicate (2: before the start), limited, remaining, retry after
	err    error
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
// pipeline bounded by the earliest deadline among them and kv.CallBudget,
// with one script per app (admitManyScript for an app with several calls).
// A cluster client sends each script to the node of its app's slot.
func (s *redisStore) runAdmits(batch []*admitCall) {
	if s.onAdmitBatch != nil {
		s.onAdmitBatch(len(batch))
	}
	if len(batch) == 1 {
		c := batch[0]
		ctx, cancel := context.WithTimeout(c.ctx, kv.CallBudget)
		defer cancel()
		reply, err := admitScript.Run(ctx, s.c, c.keys, c.args...).Slice()
		setReplies([]*admitCall{c}, reply, err)
		return
	}
	bctx, bcancel := combine.BatchContext(batch, func(c *admitCall) context.Context { return c.ctx })
	defer bcancel()
	ctx, cancel := context.WithTimeout(bctx, kv.CallBudget)
	defer cancel()
	// The calls of one app (one window key, limit and window, and the same
	// start to record) go in one script, in arrival order; an app with one
	// call uses admitScript.
	type group struct {
		calls []*admitCall
		cmd   *redis.Cmd
	}
	var groups []*group
	byWindow := make(map[string]*group, len(batch))
	for _, c := range batch {
		k := c.keys[1] + "\x00" + strconv.Itoa(c.limit) + "\x00" + strconv.FormatInt(c.window, 10) + "\x00" + c.args[6].(string)
		g := byWindow[k]
		if g == nil {
			g = &group{}
			byWindow[k] = g
			groups = append(groups, g)
		}
		g.calls = append(g.calls, c)
	}
	pipe := s.c.Pipeline()
	for _, g := range groups {
		if len(g.calls) == 1 {
			c := g.calls[0]
			g.cmd = admitScript.EvalSha(ctx, pipe, c.keys, c.args...)
			continue
		}
		keys, args := manyArgs(g.calls)
		g.cmd = admitManyScript.EvalSha(ctx, pipe, keys, args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, g := range groups {
		reply, err := g.cmd.Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// Redis lost its scripts (restart, SCRIPT FLUSH): this one
			// did not run; Run loads the script with EVAL.
			if len(g.calls) == 1 {
				c := g.calls[0]
				reply, err = admitScript.Run(ctx, s.c, c.keys, c.args...).Slice()
			} else {
				keys, args := manyArgs(g.calls)
				reply, err = admitManyScript.Run(ctx, s.c, keys, args...).Slice()
			}
		}
		setReplies(g.calls, reply, err)
	}
}

// setReplies hands a script's reply (epoch state, start, run_id, then four
// integers per call) to its calls.
func setReplies(calls []*admitCall, reply []any, err error) {
	if err == nil && len(reply) != 3+4*len(calls) {
		err = fmt.Errorf("unexpected script reply of %d values for %d calls", len(reply), len(calls))
	}
	var state, start int64
	var rid string
	if err == nil {
		var ok1, ok2, ok3 bool
		state, ok1 = reply[0].(int64)
		start, ok2 = reply[1].(int64)
		rid, ok3 = reply[2].(string)
		if !ok1 || !ok2 || !ok3 {
			err = fmt.Errorf("unexpected script reply header %v", reply[:3])
		}
	}
	for i, c := range calls {
		if err != nil {
			c.err = err
			continue
		}
		c.state, c.start, c.rid = state, start, rid
		c.res = make([]int64, 4)
		for j := range c.res {
			v, ok := reply[3+4*i+j].(int64)
			if !ok {
				c.err = fmt.Errorf("unexpected script reply value %v", reply[3+4*i+j])
				break
			}
			c.res[j] = v
		}
	}
}

// manyArgs are admitManyScript's keys and arguments for calls of one app.
func manyArgs(calls []*admitCall) ([]string, []any) {
	keys := make([]string, 0, 2+len(calls))
	keys = append(keys, calls[0].keys[1], calls[0].keys[2])
	args := make([]any, 0, 4+4*len(calls))
	args = append(args, calls[0].limit, calls[0].window, calls[0].args[6], calls[0].args[7])
	for _, c := range calls {
		keys = append(keys, c.keys[0])
		args = append(args, c.args[0], c.args[1], c.args[4], c.args[5])
	}
	return keys, args
}

// newAdmitCall is r as a call of the pipeline, bounded by ctx. init and
// initRid are the start to record for a missing epoch key and the run_id
// it is for ("" on a first attempt).
func (s *redisStore) newAdmitCall(ctx context.Context, r partner.AdmitRequest, init, initRid string) *admitCall {
	nonceKey, windowKey, epochKey := s.admitKeys(r.App, r.Nonce)
	verified := "0"
	if r.Verified {
		verified = "1"
	}
	signedAt := ""
	if !r.SignedAt.IsZero() {
		signedAt = strconv.FormatInt(r.SignedAt.UnixMilli(), 10)
	}
	return &admitCall{
		ctx:    ctx,
		keys:   []string{nonceKey, windowKey, epochKey},
		args:   []any{r.NonceTTL.Milliseconds(), verified, r.Limit, r.Window.Microseconds(), r.Nonce, signedAt, init, initRid},
		limit:  r.Limit,
		window: r.Window.Microseconds(),
	}
}

// maxEpochAttempts bounds the rounds of Admit through the start registry:
// a second "missing" only follows a failover between the two rounds.
const maxEpochAttempts = 3

func (s *redisStore) Admit(ctx context.Context, r partner.AdmitRequest) (partner.Admission, error) {
	if err := r.Validate(); err != nil {
		return partner.Admission{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, admitBudget)
	defer cancel()
	init, initRid := "", ""
	for range maxEpochAttempts {
		c := s.newAdmitCall(ctx, r, init, initRid)
		s.admits.Do(c)
		if c.err != nil {
			return partner.Admission{}, kv.WrapRedis("admit", c.err)
		}
		switch c.state {
		case epochMissing:
			// The app's epoch key is gone (first request in a day, or a
			// loss): its start is that of the server holding it.
			start, err := s.registeredStart(ctx, c.rid)
			if err != nil {
				return partner.Admission{}, err
			}
			init, initRid = strconv.FormatInt(start, 10), c.rid
			continue
		case epochSet:
			s.replay.observe(c.start)
		}
		res := c.res
		a := partner.Admission{
			DuplicateNonce: res[0] == 1,
			Limited:        res[1] == 1,
			Limit:          r.Limit,
			Remaining:      int(res[2]),
			RetryAfter:     time.Duration(res[3]) * time.Microsecond,
		}
		if res[0] == 2 {
			a = partner.Admission{BeforeStart: true, Start: time.UnixMilli(c.start)}
		}
		return a, nil
	}
	return partner.Admission{}, fmt.Errorf("%w: admit: the replay memory's start kept changing (failovers)", errs.Unavailable)
}
