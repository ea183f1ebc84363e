// Package kv is gatehouse's shared fast state: keys with a TTL, counters,
// token deny-lists, locks and sessions, and the connection to Redis (URLs,
// topologies, TLS, timeouts, readiness probes) that other stores build on.
// The signed-request gate's admission stores (nonces, rate windows, the
// replay memory) are internal/partner/admitstore, over this connection.
//
// Two implementations sit behind one interface. The in-process memory store
// is correct for a single replica; the Redis store is correct for any number
// of replicas because every check-and-update runs atomically on the server.
package kv

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Store is the shared fast state: deny-lists, locks, counters, sessions.
// The memory implementation is correct for one process; the Redis one for any number of replicas.
//
// A ttl <= 0 given to SetNX, Set or Incr means the key does not expire.
type Store interface {
	// Ping reports whether the store can serve (readiness); failures wrap errs.Unavailable.
	Ping(ctx context.Context) error
	// Close releases the Redis connections or stops the memory store's
	// cleanup goroutine. Later calls fail with errs.Unavailable.
	Close() error
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
	Del(ctx context.Context, keys ...string) error
	// Incr adds 1 to key and returns the new value; ttl is set when the key is created.
	Incr(ctx context.Context, key string, ttl time.Duration) (int64, error)
	// Decr takes 1 from an existing counter, keeping its TTL; a missing
	// key stays missing (nothing to take back).
	Decr(ctx context.Context, key string) error
}

// ErrNotInteger is returned by Incr when the key holds something other than
// a decimal 64-bit integer (or the increment would overflow).
var ErrNotInteger = errors.New("kv: value is not an integer or out of range")

// Option configures [Open].
type Option func(*options)

type options struct {
	prefix  string
	now     func() time.Time
	rootCAs *x509.CertPool
	tracer  trace.TracerProvider
}

// WithPrefix namespaces the store: every key (including those of the
// stores built on its connection: [KeyPrefix]) gets this prefix, so
// several deployments or tests can share one Redis. A memory store keeps its state per instance, so there the prefix
// has no observable effect and is not applied.
func WithPrefix(prefix string) Option {
	return func(o *options) { o.prefix = prefix }
}

// WithClock replaces the memory store's clock (tests drive expiry with it). The Redis store ignores it: Redis keeps its own time.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithRootCAs makes TLS connections to Redis (rediss://, and the TLS
// forms of the cluster and Sentinel URLs) trust these CAs instead of the
// system's: a private CA's bundle.
func WithRootCAs(pool *x509.CertPool) Option {
	return func(o *options) { o.rootCAs = pool }
}

// WithTracing makes a span per Redis command (or pipeline) through tp
// (redisotel), without the commands' arguments. Nil: none.
func WithTracing(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tp }
}

// Open returns the memory store when url is empty, else a Redis store for
// a redis://, rediss://, redis+cluster://, rediss+cluster://,
// redis+sentinel:// or rediss+sentinel:// URL (docs/deploy.md).
// Redis may be down: the process may start before it, and [Store.Ping]
// (readiness) reports it.
func Open(ctx context.Context, url string, opts ...Option) (Store, error) {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case url == "":
		return newMemory(o), nil
	case IsRedisURL(url):
		return openRedis(ctx, url, o)
	default:
		// Only the scheme is echoed: the rest of a URL may hold a password.
		scheme, _, _ := strings.Cut(url, ":")
		return nil, fmt.Errorf("kv: unsupported store URL scheme %q (want one of %s, or empty for in-process)", scheme, strings.Join(RedisSchemes, ", "))
	}
}
