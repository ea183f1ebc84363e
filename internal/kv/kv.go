// Package kv is gatehouse's shared fast state: request nonces, rate limits,
// token deny-lists, locks and counters.
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
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Store is the shared fast state: nonces, rate limits, deny-lists, locks, counters.
// The memory implementation is correct for one process; the Redis one for any number of replicas.
//
// A ttl <= 0 given to SetNX, Set or Incr means the key does not expire.
type Store interface {
	// Ping reports whether the store can serve (readiness); failures wrap errs.Unavailable.
	Ping(ctx context.Context) error
	// Close releases the Redis connections or stops the memory store's
	// cleanup goroutine. Later calls fail with errs.Unavailable.
	Close() error
	// Admit is the signed-request gate in ONE round trip. When SignedAt is
	// set and earlier than the replay memory's start (see ReplayStart), it
	// reports BeforeStart and does nothing else. Otherwise it reports whether Nonce was already
	// seen for App within NonceTTL. When Verified is true (the signature checked out) and the
	// nonce is new, it atomically records the nonce (TTL NonceTTL) and applies the sliding-window
	// rate limit: if the number of admitted requests of App in the last Window is already >= Limit,
	// the request is refused (Limited) and NOT counted; otherwise it is counted.
	// When Verified is false it only reports DuplicateNonce and records nothing.
	// The nonce is recorded even when the request is then rate-limited (it was a verified request).
	Admit(ctx context.Context, r AdmitRequest) (Admission, error)
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

// AdmitRequest is one signed request presented to [Store.Admit].
type AdmitRequest struct {
	App      string        // rate-limit and nonce namespace (the app key)
	Nonce    string        // the request's nonce, unique per App within NonceTTL
	NonceTTL time.Duration // 5 minutes in production
	Verified bool          // the signature checked out; only then is anything recorded
	Limit    int           // requests per Window
	Window   time.Duration // 1 second in production
	// SignedAt is the request's signed timestamp; zero skips the replay
	// memory's start check.
	SignedAt time.Time
}

// Admission is the outcome of [Store.Admit]. Limited, Remaining and
// RetryAfter are only meaningful for a verified request with a new nonce.
type Admission struct {
	// BeforeStart: the request was signed before the replay memory's
	// start (Start): its nonce may have been used and forgotten since.
	// Nothing else is reported or recorded.
	BeforeStart    bool
	Start          time.Time
	DuplicateNonce bool
	Limited        bool
	Limit          int
	Remaining      int           // admissions left in the current window after this one (>= 0)
	RetryAfter     time.Duration // when Limited: time until the oldest counted request leaves the window
}

// ErrNotInteger is returned by Incr when the key holds something other than
// a decimal 64-bit integer (or the increment would overflow).
var ErrNotInteger = errors.New("kv: value is not an integer or out of range")

// Option configures [Open].
type Option func(*options)

type options struct {
	prefix     string
	now        func() time.Time
	rootCAs    *x509.CertPool
	nonceMax   int
	replayFile string
	log        *slog.Logger
	tracer     trace.TracerProvider
}

// WithPrefix namespaces the store: every key (including Admit's internal
// keys) gets this prefix, so several deployments or tests can share one
// Redis. A memory store keeps its state per instance, so there the prefix
// has no observable effect and is not applied.
func WithPrefix(prefix string) Option {
	return func(o *options) { o.prefix = prefix }
}

// WithClock replaces the memory store's clock (tests drive rate windows and
// expiry with it). The Redis store ignores it: its scripts read the server's
// TIME so that replicas with skewed clocks agree on one window.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithRootCAs makes TLS connections to Redis (rediss://, and the TLS
// forms of the cluster and Sentinel URLs) trust these CAs instead of the
// system's: a private CA's bundle.
func WithRootCAs(pool *x509.CertPool) Option {
	return func(o *options) { o.rootCAs = pool }
}

// WithNonceMemoryMax bounds the memory store's replay memory to n nonces
// (default [DefaultNonceMemoryMax]); when it is full, new signed requests
// are refused with [ErrNonceMemoryFull] until entries expire. Redis ignores it.
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
// WithTracing makes a span per Redis command (or pipeline) through tp
// (redisotel), without the commands' arguments. Nil: none.
func WithTracing(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tp }
}

// WithLogger sets the logger of the store's warnings (default slog.Default).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// Open returns the memory store when url is empty, else a Redis store for
// a redis://, rediss://, redis+cluster://, rediss+cluster://,
// redis+sentinel:// or rediss+sentinel:// URL (docs/deploy.md).
// Redis may be down: the process may start before it, and [Store.Ping]
// (readiness) reports it.
func Open(ctx context.Context, url string, opts ...Option) (Store, error) {
	o := options{now: time.Now, log: slog.Default()}
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

// validate rejects requests that would make the outcome meaningless, the
// same way for both implementations.
func (r AdmitRequest) validate() error {
	switch {
	case r.App == "":
		return errors.New("kv: admit: empty app")
	case r.Nonce == "":
		return errors.New("kv: admit: empty nonce")
	case r.NonceTTL < time.Millisecond:
		// Redis expiry has millisecond resolution.
		return fmt.Errorf("kv: admit: nonce TTL %v is below 1ms", r.NonceTTL)
	case !r.Verified:
		return nil
	case r.Limit < 1:
		return fmt.Errorf("kv: admit: limit %d is below 1", r.Limit)
	case r.Window < time.Millisecond:
		return fmt.Errorf("kv: admit: window %v is below 1ms", r.Window)
	}
	return nil
}
