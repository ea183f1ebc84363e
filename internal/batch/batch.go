// Package batch gathers per-key values in memory and writes them in
// batches — periodically, on demand, and once more on Close — so that a hot
// path (a signed call, an admin call) never pays for a database write.
// Writes are expected to be increments, so that replicas add up.
package batch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// WriteFunc writes one batch and returns the entries that could not be
// written (they are merged back and retried by the next flush) and the
// error that made them fail.
type WriteFunc[K comparable, V any] func(ctx context.Context, batch map[K]V) (failed map[K]V, err error)

// Batcher is safe for concurrent use.
type Batcher[K comparable, V any] struct {
	name     string
	log      *slog.Logger
	interval time.Duration
	merge    func(a, b V) V
	write    WriteFunc[K, V]

	mu      sync.Mutex
	pending map[K]V

	flushMu   sync.Mutex // one flush at a time
	started   atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Batcher named name (for logs) that merges values of one key
// with merge and writes through write every interval once started.
func New[K comparable, V any](name string, log *slog.Logger, interval time.Duration, merge func(a, b V) V, write WriteFunc[K, V]) *Batcher[K, V] {
	return &Batcher[K, V]{
		name:     name,
		log:      log,
		interval: interval,
		merge:    merge,
		write:    write,
		pending:  make(map[K]V),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Add merges v into the pending value of k.
func (b *Batcher[K, V]) Add(k K, v V) {
	b.mu.Lock()
	if old, ok := b.pending[k]; ok {
		v = b.merge(old, v)
	}
	b.pending[k] = v
	b.mu.Unlock()
}

// Pending returns a copy of what waits to be written (tests, metrics).
func (b *Batcher[K, V]) Pending() map[K]V {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[K]V, len(b.pending))
	for k, v := range b.pending {
		out[k] = v
	}
	return out
}

// Flush writes what was gathered so far; entries that fail stay pending.
func (b *Batcher[K, V]) Flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	batch := b.pending
	b.pending = make(map[K]V, len(batch))
	b.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	failed, err := b.write(ctx, batch)
	for k, v := range failed {
		b.Add(k, v)
	}
	return err
}

// Start flushes every interval until Close.
func (b *Batcher[K, V]) Start() {
	if !b.started.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer close(b.done)
		t := time.NewTicker(b.interval)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*b.interval)
				if err := b.Flush(ctx); err != nil {
					b.log.Warn("flush "+b.name, "err", err)
				}
				cancel()
			}
		}
	}()
}

// Close stops the periodic flush (if started) and flushes what is left.
// It may be called more than once.
func (b *Batcher[K, V]) Close(ctx context.Context) error {
	b.closeOnce.Do(func() { close(b.stop) })
	if b.started.Load() {
		select {
		case <-b.done:
		case <-ctx.Done():
		}
	}
	return b.Flush(ctx)
}
