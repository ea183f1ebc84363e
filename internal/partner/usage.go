package partner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/apiusage"
	"gatehouse/internal/batch"
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
	client *ent.Client
	log    *slog.Logger
	now    func() time.Time
	b      *batch.Batcher[usageKey, int64]
	// today caches the current UTC day's text, so that counting a call
	// formats no date.
	today atomic.Pointer[usageDay]
}

// usageDay is a UTC day: its number since the epoch and its text.
type usageDay struct {
	n    int64
	text string
}

// NewUsage returns a counter writing through client. Call Start to flush
// periodically and Close to stop and flush what is left.
func NewUsage(client *ent.Client, log *slog.Logger, interval time.Duration) *Usage {
	if interval <= 0 {
		interval = DefaultUsageFlushInterval
	}
	u := &Usage{client: client, log: log, now: time.Now}
	u.b = batch.New("API usage counts", log, interval, func(a, b int64) int64 { return a + b }, u.write)
	return u
}

// Add counts one call of app appID on version ("v1").
func (u *Usage) Add(appID int, version string) {
	u.b.Add(usageKey{appID: appID, version: version, day: u.day(u.now())}, 1)
}

// day returns the UTC day of t as 2006-01-02.
func (u *Usage) day(t time.Time) string {
	n := t.Unix() / 86400
	if t.Unix() < 0 && t.Unix()%86400 != 0 {
		n-- // floor, for times before 1970
	}
	if d := u.today.Load(); d != nil && d.n == n {
		return d.text
	}
	d := &usageDay{n: n, text: t.UTC().Format(time.DateOnly)}
	u.today.Store(d)
	return d.text
}

// Start flushes every interval until Close.
func (u *Usage) Start() { u.b.Start() }

// Close stops the periodic flush (if started) and flushes what is left.
func (u *Usage) Close(ctx context.Context) error { return u.b.Close(ctx) }

// Flush writes the counts gathered so far.
func (u *Usage) Flush(ctx context.Context) error { return u.b.Flush(ctx) }

// UsageWindowDays is how many UTC days CallsByVersion adds up.
const UsageWindowDays = 30

// CallsByVersion returns the calls counted per version over the last
// UsageWindowDays UTC days, today included (what the flushes have written
// so far).
func (u *Usage) CallsByVersion(ctx context.Context) (map[string]int64, error) {
	since := u.now().UTC().AddDate(0, 0, -(UsageWindowDays - 1)).Format(time.DateOnly)
	var rows []struct {
		Version string `json:"version"`
		Sum     int64  `json:"sum"`
	}
	err := u.client.APIUsage.Query().
		Where(apiusage.DayGTE(since)).
		GroupBy(apiusage.FieldVersion).
		Aggregate(ent.Sum(apiusage.FieldCount)).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("API usage by version: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Version] = r.Sum
	}
	return out, nil
}

func (u *Usage) write(ctx context.Context, pending map[usageKey]int64) (map[usageKey]int64, error) {
	failed := map[usageKey]int64{}
	var errs []error
	for k, n := range pending {
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
			failed[k] = n
		}
	}
	if len(errs) > 0 {
		return failed, fmt.Errorf("flush API usage: %w", errors.Join(errs...))
	}
	return nil, nil
}
