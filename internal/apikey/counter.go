package apikey

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/ent"
	entapikey "gatehouse/ent/apikey"
)

// DefaultFlushInterval is how often counted key uses are written: the
// contract wants usageCount visible "within a few seconds".
const DefaultFlushInterval = time.Second

type use struct {
	n    int64
	last time.Time
}

// Counter counts accepted key uses in memory and adds them to the keys'
// rows in batches: one `usage_count = usage_count + n` per key per flush,
// never a write per request, and increments (not overwrites) so that any
// number of replicas add up. last_used_at only moves forward. A failed
// flush keeps its counts for the next one; Close flushes what is left.
type Counter struct {
	client   *ent.Client
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	pending map[int]use

	flushMu   sync.Mutex // one flush at a time
	started   atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// NewCounter returns a counter writing through client every interval
// (<= 0: DefaultFlushInterval) once started.
func NewCounter(client *ent.Client, log *slog.Logger, interval time.Duration) *Counter {
	if interval <= 0 {
		interval = DefaultFlushInterval
	}
	return &Counter{
		client:   client,
		log:      log,
		interval: interval,
		pending:  make(map[int]use),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Add counts one use of key id at t.
func (c *Counter) Add(id int, t time.Time) {
	c.mu.Lock()
	u := c.pending[id]
	u.n++
	if t.After(u.last) {
		u.last = t
	}
	c.pending[id] = u
	c.mu.Unlock()
}

// Pending returns how many uses wait to be written (tests, metrics).
func (c *Counter) Pending() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, u := range c.pending {
		n += u.n
	}
	return n
}

// Start flushes every interval until Close.
func (c *Counter) Start() {
	if !c.started.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer close(c.done)
		t := time.NewTicker(c.interval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*c.interval)
				if err := c.Flush(ctx); err != nil {
					c.log.Warn("flush API key usage counts", "err", err)
				}
				cancel()
			}
		}
	}()
}

// Close stops the periodic flush (if started) and flushes what is left.
func (c *Counter) Close(ctx context.Context) error {
	c.closeOnce.Do(func() { close(c.stop) })
	if c.started.Load() {
		select {
		case <-c.done:
		case <-ctx.Done():
		}
	}
	return c.Flush(ctx)
}

// Flush writes the uses counted so far.
func (c *Counter) Flush(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	batch := c.pending
	c.pending = make(map[int]use, len(batch))
	c.mu.Unlock()
	var errs []error
	for id, u := range batch {
		if u.n > 0 {
			n, err := c.client.APIKey.Update().Where(entapikey.ID(id)).AddUsageCount(u.n).Save(ctx)
			if err != nil {
				errs = append(errs, err)
				c.requeue(id, u)
				continue
			}
			if n == 0 {
				c.log.Warn("dropping usage of a missing API key", "api_key_id", id, "count", u.n)
				continue
			}
		}
		// Replicas flush in any order: never move last_used_at backwards.
		_, err := c.client.APIKey.Update().
			Where(entapikey.ID(id), entapikey.Or(entapikey.LastUsedAtIsNil(), entapikey.LastUsedAtLT(u.last))).
			SetLastUsedAt(u.last).
			Save(ctx)
		if err != nil {
			errs = append(errs, err)
			c.requeue(id, use{last: u.last}) // the count itself is stored
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("flush API key usage: %w", errors.Join(errs...))
	}
	return nil
}

func (c *Counter) requeue(id int, u use) {
	c.mu.Lock()
	p := c.pending[id]
	p.n += u.n
	if u.last.After(p.last) {
		p.last = u.last
	}
	c.pending[id] = p
	c.mu.Unlock()
}
