// Package admitstore holds the signed-request gate's admission stores: the
// nonces, the sliding-window rate limit and the replay memory's start
// behind [partner.Admitter].
//
// Two implementations sit behind one interface, chosen by the key-value
// store they are opened over. The in-process memory store is correct for a
// single replica; the Redis store is correct for any number of replicas
// because every check-and-update runs atomically on the server, through
// the connection internal/kv opened (same prefix, same client).
package admitstore

import (
	"context"
	"log/slog"
	"time"

	"gatehouse/internal/kv"
	"gatehouse/internal/partner"
)

// Store is an admission store: [partner.Admitter], plus what readiness and
// shutdown need.
type Store interface {
	partner.Admitter
	// ReplayStart is the moment since which the replay memory is
	// complete, as far as this process knows: signed requests stamped
	// earlier are refused. For the memory store it is the process's
	// start, or the start carried over by a saved replay memory; on
	// Redis, the latest start recorded for any server or app this
	// process has dealt with.
	//
	// It is the zero time when the memory has never lost anything (the
	// first start of the memory store in its data dir): there is no
	// start to show.
	ReplayStart() time.Time
	// HealthChecks are the store's checks for /readyz ([kv.CheckHealth]):
	// on Redis, registering masters seen for the first time in the
	// replay memory's registry (epoch.go), so that /readyz shows their
	// start. The memory store has none.
	HealthChecks() []kv.HealthCheck
	// Close stops the memory store's cleanup goroutine and, with a
	// replay file, saves the live nonces to it; later calls to Admit
	// fail with errs.Unavailable. On Redis it does nothing: the
	// connection is the key-value store's, closed with it.
	Close() error
}

// Option configures [Open].
type Option func(*options)

type options struct {
	now        func() time.Time
	nonceMax   int
	replayFile string
	log        *slog.Logger
}

// WithClock replaces the memory store's clock (tests drive rate windows and
// expiry with it). The Redis store only starts its view of the replay
// memory's start on it: its scripts read the server's TIME so that
// replicas with skewed clocks agree on one window.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithNonceMemoryMax bounds the memory store's replay memory to n nonces
// (default [DefaultNonceMemoryMax]); when it is full, new signed requests
// are refused with [partner.ErrNonceMemoryFull] until entries expire. Redis ignores it.
func WithNonceMemoryMax(n int) Option {
	return func(o *options) { o.nonceMax = n }
}

// WithReplayFile makes the memory store load its replay memory from path
// at open (then remove the file, so that it is used once) and save it
// there at Close: a graceful restart keeps the nonces, and their start.
// Redis ignores it.
func WithReplayFile(path string) Option {
	return func(o *options) { o.replayFile = path }
}

// WithLogger is where the store logs what an operator must see (a full
// replay memory, a replay file that could not be read). Default: slog's.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// Open returns the Redis admission store over kvStore's connection and key
// prefix when kvStore is a Redis store, else the memory store. Redis may be
// down: the process may start before it, and the admissions (503) and
// /readyz report it.
func Open(ctx context.Context, kvStore kv.Store, opts ...Option) (Store, error) {
	o := options{now: time.Now, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if c, ok := kv.RedisClient(kvStore); ok {
		return openRedis(ctx, c, kv.KeyPrefix(kvStore), o), nil
	}
	return newMemory(o), nil
}
