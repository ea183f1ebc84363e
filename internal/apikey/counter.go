package apikey

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gatehouse/ent"
	entapikey "gatehouse/ent/apikey"
	"gatehouse/internal/batch"
	"gatehouse/internal/store"
)

// DefaultFlushInterval is how often counted key uses are written: the
// admin API shows usageCount "within a few seconds".
const DefaultFlushInterval = time.Second

type use struct {
	n    int64
	last time.Time
}

func mergeUse(a, b use) use {
	a.n += b.n
	if b.last.After(a.last) {
		a.last = b.last
	}
	return a
}

// Counter counts accepted key uses in memory and adds them to the keys'
// rows in batches: one `usage_count = usage_count + n` per key per flush,
// never a write per request, and increments (not overwrites) so that any
// number of replicas add up. last_used_at only moves forward. A failed
// flush keeps its counts for the next one; Close flushes what is left.
type Counter struct {
	client *ent.Client
	log    *slog.Logger
	b      *batch.Batcher[int, use]
}

// NewCounter returns a counter writing through client every interval
// (<= 0: DefaultFlushInterval) once started.
func NewCounter(client *ent.Client, log *slog.Logger, interval time.Duration) *Counter {
	if interval <= 0 {
		interval = DefaultFlushInterval
	}
	c := &Counter{client: client, log: log}
	c.b = batch.New("API key usage counts", log, interval, mergeUse, c.write)
	return c
}

// Add counts one use of key id at t.
func (c *Counter) Add(id int, t time.Time) { c.b.Add(id, use{n: 1, last: t}) }

// Start flushes every interval until Close.
func (c *Counter) Start() { c.b.Start() }

// Close stops the periodic flush (if started) and flushes what is left.
func (c *Counter) Close(ctx context.Context) error { return c.b.Close(ctx) }

// Flush writes the uses counted so far.
func (c *Counter) Flush(ctx context.Context) error { return c.b.Flush(ctx) }

func (c *Counter) write(ctx context.Context, pending map[int]use) (map[int]use, error) {
	failed := map[int]use{}
	var errs []error
	for id, u := range pending {
		// One transaction per key: a reader sees the count and the time
		// of its last use move together.
		missing := false
		err := store.WithTx(ctx, c.client, func(tx *ent.Tx) error {
			if u.n > 0 {
				n, err := tx.APIKey.Update().Where(entapikey.ID(id)).AddUsageCount(u.n).Save(ctx)
				if err != nil {
					return err
				}
				if missing = n == 0; missing {
					return nil
				}
			}
			// Replicas flush in any order: never move last_used_at backwards.
			_, err := tx.APIKey.Update().
				Where(entapikey.ID(id), entapikey.Or(entapikey.LastUsedAtIsNil(), entapikey.LastUsedAtLT(u.last))).
				SetLastUsedAt(u.last).
				Save(ctx)
			return err
		})
		switch {
		case err != nil:
			errs = append(errs, err)
			failed[id] = u
		case missing:
			c.log.Warn("dropping usage of a missing API key", "api_key_id", id, "count", u.n)
		}
	}
	if len(errs) > 0 {
		return failed, fmt.Errorf("flush API key usage: %w", errors.Join(errs...))
	}
	return nil, nil
}
