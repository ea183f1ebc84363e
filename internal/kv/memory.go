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
)

// shardCount spreads keys and apps over independent locks so that
// unrelated apps do not contend and a sweep only pauses 1/shardCount of the
// store at a time.
const shardCount = 32

// sweepEvery is how often expired entries are dropped. Expired entries are
// already invisible (every read checks expiry); the sweep only bounds
// memory, to what arrives within TTL + sweepEvery.
const sweepEvery = 30 * time.Second

// never is the expiry tick of an entry without TTL.
const never = math.MaxInt64

// memoryStore is the in-process Store. Times are kept as int64 nanosecond
// ticks since the store was opened: 8 bytes per window entry, and, with the
// real clock, monotonic, so a wall-clock step cannot stretch a rate window.
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
	apps  map[string]*appState
}

type memItem struct {
	value   []byte
	expires int64 // tick; never when the item has no TTL
}

// appState is everything Admit keeps for one app, under its shard's lock,
// which is what makes check-and-record atomic.
type appState struct {
	nonces map[string]int64 // nonce → expiry tick
	window int64            // the window last used, so the sweep can prune idle apps
	times  ring             // tick of every counted admission still in the window, oldest first
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
		s.shards[i].apps = make(map[string]*appState)
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
		return fmt.Errorf("%w: memory store is closed", ErrUnavailable)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

func (s *memoryStore) Ping(ctx context.Context) error { return s.check(ctx) }

func (s *memoryStore) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.done
	})
	return nil
}

func (s *memoryStore) Admit(ctx context.Context, r AdmitRequest) (Admission, error) {
	if err := r.validate(); err != nil {
		return Admission{}, err
	}
	if err := s.check(ctx); err != nil {
		return Admission{}, err
	}
	a := Admission{Limit: r.Limit}
	sh := s.shard(r.App)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// The tick is read under the lock so each app's ring stays in time order.
	now := s.tick()
	st := sh.apps[r.App]
	if st != nil {
		if exp, ok := st.nonces[r.Nonce]; ok && now < exp {
			a.DuplicateNonce = true
			return a, nil
		}
	}
	if !r.Verified {
		return a, nil
	}
	if st == nil {
		st = &appState{nonces: make(map[string]int64)}
		sh.apps[r.App] = st
	}
	st.nonces[r.Nonce] = now + int64(r.NonceTTL)
	window := int64(r.Window)
	st.window = window
	st.times.dropUpTo(now - window)
	if n := st.times.len(); n >= r.Limit {
		// Normally n == Limit and this is the oldest entry; after the limit
		// was lowered it is the one whose departure brings n below Limit.
		a.Limited = true
		a.RetryAfter = time.Duration(st.times.at(n-r.Limit) + window - now)
		return a, nil
	}
	st.times.push(now, r.Limit)
	a.Remaining = r.Limit - st.times.len()
	return a, nil
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

// sweep drops every expired item, nonce and window entry, and apps with
// nothing left, one shard at a time.
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
		for app, st := range sh.apps {
			for n, exp := range st.nonces {
				if now >= exp {
					delete(st.nonces, n)
				}
			}
			st.times.dropUpTo(now - st.window)
			if len(st.nonces) == 0 && st.times.len() == 0 {
				delete(sh.apps, app)
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

// ring is a FIFO of ticks in time order. It grows on demand up to the
// app's limit and never beyond, because a full window refuses (and does not
// record) further requests.
type ring struct {
	buf  []int64
	head int
	n    int
}

func (r *ring) len() int { return r.n }

func (r *ring) at(i int) int64 { return r.buf[(r.head+i)%len(r.buf)] }

// dropUpTo removes the entries at or before cutoff: they left the window.
func (r *ring) dropUpTo(cutoff int64) {
	for r.n > 0 && r.buf[r.head] <= cutoff {
		r.head = (r.head + 1) % len(r.buf)
		r.n--
	}
	if r.n == 0 {
		r.head = 0
	}
}

// push appends v; the caller guarantees r.len() < limit.
func (r *ring) push(v int64, limit int) {
	if r.n == len(r.buf) {
		size := min(max(2*len(r.buf), 8), limit)
		buf := make([]int64, size)
		for i := range r.n {
			buf[i] = r.at(i)
		}
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}
