package admitstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"gatehouse/internal/kv"
)

// The replay memory's start.
//
// Nonces live in memory or in Redis, and either can lose them: a process
// killed without saving them, a Redis restarted empty, flushed, or failed
// over to a replica that had not received the last writes. A request whose
// nonce was forgotten could be replayed while its timestamp is still
// accepted, so the moment the memory was found empty is kept as its start,
// and a request signed before that moment is refused (it may have been used
// before the loss).
//
// On Redis the check runs inside the admission script, on one key per app
// (the epoch key, "<prefix>admit:{<app>}:e", in the app's hash slot so a
// cluster runs it on the node that holds the app's nonces). It holds the
// start and the run_id of the server that wrote it. The script reads the
// run_id of the server it runs on (INFO server): a different one means the
// key came from another server through replication or persistence, so this
// server may have missed the newest nonces, and the start becomes now. A
// missing epoch key is either an app not seen for a day (the key's TTL) or
// a loss; the start registry ("<prefix>replay:starts", a hash from run_id to
// the moment that server was first seen) tells them apart: the script's
// caller asks the registry for the start of the server holding the app's
// keys (registering it now if it is new, which is also what a flush or a
// restart makes it), and runs the script again with it.
const (
	// epochTTL bounds the life of an app's epoch key; a later request
	// recreates it from the registry.
	epochTTL = 24 * time.Hour
	// registryTTL keeps the registry as long as a replica starts, answers
	// /readyz or admits a new app at least once a week.
	registryTTL = 7 * 24 * time.Hour
)

// registryScript returns the start (ms) recorded for the server run_id
// ARGV[1], recording now (rounded up to the next millisecond) if there is
// none, and renews the registry's TTL (ARGV[2], ms).
var registryScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then
  local t = redis.call('TIME')
  v = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + 1)
  redis.call('HSET', KEYS[1], ARGV[1], v)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return v
`)

// epochLua is the admission scripts' first step: the start (ms) of the app's
// replay memory on this server, from the epoch key ek. init and initRid are
// the start to record when the key is missing and the run_id it is for
// (empty on a first attempt). It returns the start, a state (0 unchanged, 1
// recorded or reset now, 2 missing: ask the registry) and this server's
// run_id. Numbers go through string.format: Lua 5.1 prints a 13-digit
// number in exponent form.
const epochLua = `
local function epoch(ek, init, initRid)
  local rid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
  local e = redis.call('GET', ek)
  if e then
    local s, id = string.match(e, '^(%d+):(%x+)$')
    if id == rid then
      return tonumber(s), 0, rid
    end
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + 1
    redis.call('SET', ek, string.format('%d', now) .. ':' .. rid, 'PX', ` + "EPOCH_TTL" + `)
    return now, 1, rid
  end
  if init ~= '' and initRid == rid then
    redis.call('SET', ek, init .. ':' .. rid, 'PX', ` + "EPOCH_TTL" + `)
    return tonumber(init), 1, rid
  end
  return 0, 2, rid
end
`

// withEpoch prepends epochLua to a script's body.
func withEpoch(body string) string {
	return strings.ReplaceAll(epochLua, "EPOCH_TTL", strconv.FormatInt(epochTTL.Milliseconds(), 10)) + body
}

// Epoch states returned by the admission scripts.
const (
	epochKnown   = 0
	epochSet     = 1
	epochMissing = 2
)

// replayStartGauge shows the latest replay memory start a store of this
// process has seen (the memory store's own; on Redis, the latest recorded
// for any app or server this process has dealt with).
var replayStartGauge = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "gatehouse_replay_memory_start_seconds",
	Help: "Unix time since which the replay memory (used nonces) is complete; signed requests stamped earlier are refused (4003).",
})

func init() { prometheus.MustRegister(replayStartGauge) }

// replayState is a store's view of its replay memory's start: the latest
// start it has seen, in Unix milliseconds.
type replayState struct {
	startMs atomic.Int64
}

func (r *replayState) init(now time.Time) { r.observe(now.UnixMilli()) }

// observe records a start seen at an admission or registration; the view
// only moves forward.
func (r *replayState) observe(ms int64) {
	for {
		cur := r.startMs.Load()
		if ms <= cur {
			return
		}
		if r.startMs.CompareAndSwap(cur, ms) {
			replayStartGauge.Set(float64(ms) / 1000)
			return
		}
	}
}

func (r *replayState) start() time.Time { return time.UnixMilli(r.startMs.Load()) }

// ReplayStart is [Store.ReplayStart]: the latest start recorded for any
// server or app this process has dealt with.
func (s *redisStore) ReplayStart() time.Time { return shownStart(s.replay.start()) }

// shownStart is t, or the zero time when there is no start to show (a
// memory that never lost anything).
func shownStart(t time.Time) time.Time {
	if t.UnixMilli() <= 0 {
		return time.Time{}
	}
	return t
}

// HealthChecks is [Store.HealthChecks]: the replay registry, refreshed at
// every readiness check.
func (s *redisStore) HealthChecks() []kv.HealthCheck {
	return []kv.HealthCheck{{Name: "replay registry", Run: s.refreshReplayStart}}
}

func (s *redisStore) registryKey() string { return s.prefix + "replay:starts" }

// registeredStart is the registry's start for the server with run_id rid.
func (s *redisStore) registeredStart(ctx context.Context, rid string) (int64, error) {
	v, err := registryScript.Run(ctx, s.c, []string{s.registryKey()}, rid, registryTTL.Milliseconds()).Text()
	if err != nil {
		return 0, kv.WrapRedis("replay registry", err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, kv.WrapRedis("replay registry", err)
	}
	s.replay.observe(ms)
	return ms, nil
}

// refreshReplayStart registers every master (a server seen for the first
// time gets now as its start) and takes their starts into the store's view.
// It runs at open and with each readiness check (HealthChecks); the admissions do not need
// it (they detect on their own), but a server registered before the first
// request of an app arrives does not refuse that request as signed before
// the start.
func (s *redisStore) refreshReplayStart(ctx context.Context) error {
	var mu sync.Mutex
	var rids []string
	err := kv.Masters(ctx, s.c, func(ctx context.Context, m redis.Cmdable) error {
		rid, err := runID(ctx, m)
		if err != nil {
			return err
		}
		mu.Lock()
		rids = append(rids, rid)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return kv.WrapRedis("replay registry", err)
	}
	for _, rid := range rids {
		if _, err := s.registeredStart(ctx, rid); err != nil {
			return err
		}
	}
	return nil
}

// runID is the run_id of the server m talks to.
func runID(ctx context.Context, m redis.Cmdable) (string, error) {
	info, err := m.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v, nil
		}
	}
	return "", errNoRunID
}

var errNoRunID = errors.New("admitstore: INFO server has no run_id")
