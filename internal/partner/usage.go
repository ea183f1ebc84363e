package partner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/apiusage"
)

// DefaultUsageFlushInterval is how often counted calls are written.
const DefaultUsageFlushInterval = 2 * time.Second

type usageKey struct {
	appID   int
	version string
	day     string // UTC, 2006-01-02
}

// Usage counts admitted partner calls per app, API version and UTC day.
// Counting is in memory (a map increment under a mutex); every flush adds
// the counts to the APIUsage rows with one upsert per (app, version, day)
// — count = count + n — so that any number of replicas add up. A failed
// flush keeps its counts for the next one.
type Usage struct {
	client   *ent.Client
	log      *slog.Logger
	now      func() time.Time
	interval time.Duration

	mu      sync.Mutex
	pending map[usageKey]int64

	flushMu   sync.Mutex // one flush at a time
	started   atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// NewUsage returns a counter writing through client. Call Start to flush
// periodically and Close to stop and flush what is left.
func NewUsage(client *ent.Client, log *slog.Logger, interval time.Duration) *Usage {
	if interval <= 0 {
		interval = DefaultUsageFlushInterval
	}
	return &Usage{
		client:   client,
		log:      log,
		now:      time.Now,
		interval: interval,
		pending:  make(map[usageKey]int64),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Add counts one call of app appID on version ("v1").
func (u *Usage) Add(appID int, version string) {
	k := usageKey{appID: appID, version: version, day: u.now().UTC().Format(time.DateOnly)}
	u.mu.Lock()
	u.pending[k]++
	u.mu.Unlock()
}

// Start flushes every interval until Close.
func (u *Usage) Start() {
	if !u.started.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer close(u.done)
		t := time.NewTicker(u.interval)
		defer t.Stop()
		for {
			select {
			case <-u.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), u.interval*5)
				if err := u.Flush(ctx); err != nil {
					u.log.Warn("flush API usage counts", "err", err)
				}
				cancel()
			}
		}
	}()
}

// Close stops the periodic flush (if started) and flushes what is left.
func (u *Usage) Close(ctx context.Context) error {
	u.closeOnce.Do(func() {
		close(u.stop)
	})
	if u.started.Load() {
		select {
		case <-u.done:
		case <-ctx.Done():
		}
	}
	return u.Flush(ctx)
}

// Flush writes the counts gathered so far.
func (u *Usage) Flush(ctx context.Context) error {
	u.flushMu.Lock()
	defer u.flushMu.Unlock()
	u.mu.Lock()
	batch := u.pending
	u.pending = make(map[usageKey]int64, len(batch))
	u.mu.Unlock()
	var errs []error
	for k, n := range batch {
		err := u.client.APIUsage.Create().
			SetAppID(k.appID).SetVersion(k.version).SetDay(k.day).SetCount(n).
			OnConflictColumns(apiusage.FieldAppID, apiusage.FieldVersion, apiusage.FieldDay).
			AddCount(n).
			Exec(ctx)
		switch {
		case err == nil:
		case ent.IsConstraintError(err):
			// The app is gone (foreign key): these counts have nowhere to go.
			u.log.Warn("dropping API usage of a missing app", "app_id", k.appID, "version", k.version, "day", k.day, "count", n)
		default:
			errs = append(errs, err)
			u.mu.Lock()
			u.pending[k] += n
			u.mu.Unlock()
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("flush API usage: %w", errors.Join(errs...))
	}
	return nil
}
