package kv

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/internal/errs"
)

// shardCount spreads keys over independent locks so that
// unrelated keys do not contend and a sweep only pauses 1/shardCount of the
// store at a time.
const shardCount = 32

// sweepEvery is how often expired entries are dropped. Expired entries are
// already invisible (every read checks expiry); the sweep only bounds
// memory, to what arrives within TTL + sweepEvery.
const sweepEvery = 30 * time.Second

// never is the expiry tick of an entry without TTL.
const never = math.MaxInt64

// memoryStore is the in-process Store. Times are kept as int64 nanosecond
// ticks since the store was opened: with the real clock, monotonic, so a
// wall-clock step cannot stretch a TTL.
type memoryStore struct {
	now    func() time.Time
	epoch  time.Time
	seed   maphash.Seed
	shards [shardCount]memShard
	closed atomic.Bool

	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

type memShard struct {
	mu    sync.Mutex
	items map[string]memItem
}

type memItem struct {
	value   []byte
	expires int64 // tick; never when the item has no TTL
}

func newMemory(o options) *memoryStore {
	s := &memoryStore{
		now:  o.now,
		seed: maphash.MakeSeed(),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	s.epoch = s.now()
	for i := range s.shards {
		s.shards[i].items = make(map[string]memItem)
	}
	go s.janitor()
	return s
}

func (s *memoryStore) tick() int64 { return int64(s.now().Sub(s.epoch)) }

func (s *memoryStore) shard(key string) *memShard {
	return &s.shards[maphash.String(s.seed, key)%shardCount]
}

// check makes a closed memory store behave like an unreachable Redis, so
// callers have one failure mode to handle.
func (s *memoryStore) check(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: kv memory store is closed", errs.Unavailable)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w: %w", errs.Unavailable, errs.KV, err)
	}
	return nil
}

func (s *memoryStore) Ping(ctx context.Context) error { return s.check(ctx) }

// Close stops the store's cleanup goroutine.
func (s *memoryStore) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.done
	})
	return nil
}

func (s *memoryStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.tick()
	if it, ok := sh.items[key]; ok && now < it.expires {
		return false, nil
	}
	sh.items[key] = memItem{value: clone(value), expires: expiry(now, ttl)}
	return true, nil
}

func (s *memoryStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.items[key] = memItem{value: clone(value), expires: expiry(s.tick(), ttl)}
	return nil
}

func (s *memoryStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.check(ctx); err != nil {
		return nil, false, err
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it, ok := sh.items[key]
	if !ok {
		return nil, false, nil
	}
	if s.tick() >= it.expires {
		delete(sh.items, key)
		return nil, false, nil
	}
	// A copy, so that the caller cannot change the stored value.
	return clone(it.value), true, nil
}

func (s *memoryStore) Del(ctx context.Context, keys ...string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	for _, key := range keys {
		sh := s.shard(key)
		sh.mu.Lock()
		delete(sh.items, key)
		sh.mu.Unlock()
	}
	return nil
}

func (s *memoryStore) Incr(ctx context.Context, key string, ttl time.Duration) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.tick()
	it, ok := sh.items[key]
	if !ok || now >= it.expires {
		it = memItem{expires: expiry(now, ttl)}
	}
	var n int64
	if it.value != nil {
		v, err := strconv.ParseInt(string(it.value), 10, 64)
		if err != nil || v == math.MaxInt64 {
			return 0, ErrNotInteger
		}
		n = v
	}
	n++
	// Stored as decimal text, as Redis does, so Get returns the same bytes
	// from either implementation.
	it.value = strconv.AppendInt(nil, n, 10)
	sh.items[key] = it
	return n, nil
}

func (s *memoryStore) Decr(ctx context.Context, key string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it, ok := sh.items[key]
	if !ok || s.tick() >= it.expires {
		return nil
	}
	v, err := strconv.ParseInt(string(it.value), 10, 64)
	if err != nil || v == math.MinInt64 {
		return ErrNotInteger
	}
	it.value = strconv.AppendInt(nil, v-1, 10)
	sh.items[key] = it
	return nil
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

// sweep drops every expired item, one shard at a time.
func (s *memoryStore) sweep() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		now := s.tick()
		for k, it := range sh.items {
			if now >= it.expires {
				delete(sh.items, k)
			}
		}
		sh.mu.Unlock()
	}
}

func expiry(now int64, ttl time.Duration) int64 {
	if ttl <= 0 {
		return never
	}
	return now + int64(ttl)
}

func clone(b []byte) []byte {
	// Never nil, so that a stored empty value is distinguishable from none.
	return append(make([]byte, 0, len(b)), b...)
}
