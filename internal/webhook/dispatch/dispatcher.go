// Package dispatch is the webhook dispatcher: it claims due deliveries
// with a lease (fair across apps, capped per app and per endpoint), has
// the sender attempt them, records each outcome and moves its delivery
// on, keeps a breaker and a rate limit per endpoint, wakes up on NOTIFY,
// and runs the retention job and the auto-disable check. Its raw SQL is
// in the adapter subpackage.
package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/audit"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/webhook/dispatch/adapter"
	"gatehouse/internal/webhook/sender"
)

// Config configures a Dispatcher; the webhook service fills it from its
// Options, defaults applied, and each field means what the Options field
// of the same name says (Retention 0: kept forever).
type Config struct {
	RetryBase                               time.Duration
	Workers, PerApp                         int
	Lease, AttemptTimeout, PollInterval     time.Duration
	DrainTimeout, Retention, RetentionEvery time.Duration
	RetentionBatch                          int
	// Tracing makes a span per attempt (nil: off).
	Tracing *telemetry.Tracing
	// Now is the one clock of due times, leases, signatures, rate limits
	// and the breakers' open wait (tests move it).
	Now func() time.Time
	// PurgePublications runs with the retention job: it deletes the
	// publish idempotency keys past their window (nil: nothing).
	PurgePublications func(context.Context) (int, error)
	// DisableEndpoint disables endpoint id at now for AutoDisable unless
	// it is disabled already (then ErrNoLongerDue).
	DisableEndpoint func(ctx context.Context, id int, now time.Time) error
}

// Dispatcher sends queued deliveries (Start, Close), purges old ones and
// disables endpoints that keep failing.
type Dispatcher struct {
	db     *store.DB
	client *ent.Client
	sealer *secret.Sealer
	log    *slog.Logger
	opt    Config
	send   *sender.Sender
	// apps caches endpoints' secrets (by endpoint id); limits are the
	// endpoints' delivery rate limiters.
	apps   *appCache
	limits *limiters
	sql    *adapter.Statements
	// audit records AutoDisable's changes (SetAudit; nil: none).
	audit atomic.Pointer[audit.Service]

	// wake holds at most one pending wake-up of the dispatch loop.
	wake chan struct{}
	// handoffs counts the deliveries workers took by hand-off (see the
	// dispatcher's work), for tests.
	handoffs atomic.Int64

	// announcing holds the open transactions that queued work and will
	// announce it at their commit (see WakeOnCommit).
	announcing txSet

	mu      sync.Mutex
	started bool
	d       *dispatcher
	out     *outcomeWriter
	bg      context.CancelFunc // stops LISTEN and retention
	bgDone  sync.WaitGroup
}

// New returns a Dispatcher over db that sends through send; sealer
// unseals the endpoints' secrets.
func New(db *store.DB, sealer *secret.Sealer, send *sender.Sender, log *slog.Logger, opt Config) *Dispatcher {
	s := &Dispatcher{
		db:     db,
		client: db.Client,
		sealer: sealer,
		log:    log,
		opt:    opt,
		send:   send,
		wake:   make(chan struct{}, 1),
	}
	s.apps = newAppCache(s.loadEndpoint)
	s.limits = newLimiters()
	s.sql = adapter.NewStatements(db)
	registerBreakers(s)
	backlog.add(s)
	return s
}

// ExpectAlerts makes the alert counter of failed deliveries of event type
// name exist at 0.
func ExpectAlerts(name string) { failedTotal.WithLabelValues(name) }

// now is the dispatcher's clock, in the form stored in the database.
func (s *Dispatcher) now() time.Time { return adapter.DBTime(s.opt.Now()) }

// writer is the outcome writer while the dispatcher runs.
func (s *Dispatcher) writer() *outcomeWriter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out
}

// PollInterval is the longest the dispatcher sleeps without looking at
// the table (Options.PollInterval, or its default for the database).
func (s *Dispatcher) PollInterval() time.Duration { return s.opt.PollInterval }

// AttemptTimeout bounds one attempt.
func (s *Dispatcher) AttemptTimeout() time.Duration { return s.opt.AttemptTimeout }

// Handoffs is how many deliveries the workers took by hand-off.
func (s *Dispatcher) Handoffs() int64 { return s.handoffs.Load() }

// Notify wakes the dispatcher: new work may be due. It never blocks.
func (s *Dispatcher) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start launches the dispatcher, the retention job and, on Postgres, the
// LISTEN connection that wakes the dispatcher when any replica queues
// work. They run until Close; ctx is not used to stop them, so that
// shutdown can let attempts finish in order.
func (s *Dispatcher) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	s.out = newOutcomeWriter(s)
	s.d = newDispatcher(s)
	go s.d.run()
	ctx, cancel := context.WithCancel(context.Background())
	s.bg = cancel
	s.bgDone.Add(2)
	go func() {
		defer s.bgDone.Done()
		s.db.Listen(ctx, NotifyChannel, s.Notify, s.log)
	}()
	go func() {
		defer s.bgDone.Done()
		s.retain(ctx)
	}()
}

// Close stops claiming work, lets in-flight attempts finish for at most
// Config.DrainTimeout (or until ctx ends, whichever is first), then
// aborts the rest and releases their leases so another replica (or the
// next start) takes them over at once.
func (s *Dispatcher) Close(ctx context.Context) error {
	s.mu.Lock()
	d, bg := s.d, s.bg
	s.d, s.bg = nil, nil
	s.mu.Unlock()
	if bg != nil {
		bg()
		s.bgDone.Wait()
	}
	var err error
	if d != nil {
		err = d.shutdown(ctx) // every worker has stored its outcome
	}
	s.mu.Lock()
	out := s.out
	s.out = nil
	s.mu.Unlock()
	if out != nil {
		out.close()
	}
	s.send.Close()
	unregisterBreakers(s)
	backlog.remove(s)
	s.sql.Close()
	return err
}
