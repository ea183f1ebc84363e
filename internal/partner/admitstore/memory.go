package admitstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/kv"
)

// shardCount spreads apps over independent locks so that unrelated apps do
// not contend and a sweep only pauses 1/shardCount of the store at a time.
const shardCount = 32

// sweepEvery is how often expired entries are dropped. Expired entries are
// already invisible (every admission checks expiry); the sweep only bounds
// memory, to what arrives within TTL + sweepEvery.
const sweepEvery = 30 * time.Second

// memoryStore is the in-process admission store. Times are kept as int64
// nanosecond ticks since the store was opened: 8 bytes per window entry,
// and, with the real clock, monotonic, so a wall-clock step cannot stretch
// a rate window.
type memoryStore struct {
	now   func() time.Time
	epoch time.Time
	seed  maphash.Seed
	// nonceSeed keys the nonce hashes (admit_memory.go).
	nonceSeed uint64
	shards    [shardCount]memShard
	closed    atomic.Bool

	// The replay memory (nonces.go): its start (Unix ms), its bound, the
	// nonces it holds, and the file it is saved to at Close.
	startMs    atomic.Int64
	nonceMax   int64
	nonceCount atomic.Int64
	replayFile string
	log        *slog.Logger
	reclaimMu  sync.Mutex
	lastSweep  atomic.Int64 // tick of the last sweep
	lastWarn   atomic.Int64 // tick of the last "full" warning

	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

type memShard struct {
	mu   sync.Mutex
	apps map[string]*appState // Admit's state (admit_memory.go)
}

func newMemory(o options) *memoryStore {
	s := &memoryStore{
		now:        o.now,
		seed:       maphash.MakeSeed(),
		nonceSeed:  randomSeed(),
		nonceMax:   int64(o.nonceMax),
		replayFile: o.replayFile,
		log:        o.log,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if s.nonceMax <= 0 {
		s.nonceMax = DefaultNonceMemoryMax
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.epoch = s.now()
	for i := range s.shards {
		s.shards[i].apps = make(map[string]*appState)
	}
	// Without a saved replay memory, it starts now.
	s.setStart(s.epoch)
	if s.replayFile != "" {
		s.loadReplayFile()
	}
	go s.janitor()
	return s
}

func (s *memoryStore) tick() int64 { return int64(s.now().Sub(s.epoch)) }

func (s *memoryStore) shard(app string) *memShard {
	return &s.shards[maphash.String(s.seed, app)%shardCount]
}

// check makes a closed memory store behave like an unreachable Redis, so
// callers have one failure mode to handle.
func (s *memoryStore) check(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: admission memory store is closed", errs.Unavailable)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w: %w", errs.Unavailable, errs.KV, err)
	}
	return nil
}

// HealthChecks: the memory store has none beyond the key-value store's.
func (s *memoryStore) HealthChecks() []kv.HealthCheck { return nil }

// Close stops the store and, with a replay file, saves the live nonces
// to it (after every Admit has returned: none runs once closed is set).
func (s *memoryStore) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.done
		if s.replayFile != "" {
			err = s.saveReplayFile()
		}
	})
	return err
}

func (s *memoryStore) janitor() {
	defer close(s.done)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep()
		}
	}
}

// sweep drops every expired nonce and window entry, and apps with nothing
// left, one shard at a time.
func (s *memoryStore) sweep() {
	s.lastSweep.Store(s.tick())
	defer func() { nonceEntriesGauge.Set(float64(s.nonceCount.Load())) }()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		now := s.tick()
		for app, st := range sh.apps {
			var dropped int64
			for n, exp := range st.nonces {
				if now >= exp {
					delete(st.nonces, n)
					dropped++
				}
			}
			s.nonceCount.Add(-dropped)
			st.times.dropUpTo(now - st.window)
			if len(st.nonces) == 0 && st.times.len() == 0 {
				delete(sh.apps, app)
			}
		}
		sh.mu.Unlock()
	}
}
