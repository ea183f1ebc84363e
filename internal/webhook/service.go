package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/outbound"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
)

// ErrNotFound means no webhook delivery (or, for ResendFailed, no partner
// app) has the given id.
var ErrNotFound = errors.New("webhook delivery not found")

// Defaults of Options.
const (
	// DefaultWorkers is the number of attempts one process runs at once.
	DefaultWorkers = 16
	// DefaultLease is how long a claimed delivery belongs to its worker. It
	// must exceed AttemptTimeout plus the time to store the outcome; after a
	// crash the delivery is picked up again once it has run out.
	DefaultLease = 30 * time.Second
	// DefaultAttemptTimeout bounds one HTTP attempt, body read included.
	DefaultAttemptTimeout = 15 * time.Second
	// DefaultPollInterval is the longest the dispatcher sleeps without
	// looking at the table: it finds work enqueued by other replicas and
	// leases left behind by crashed ones. Work enqueued in this process
	// wakes it at once.
	DefaultPollInterval = time.Second
	// DefaultDrainTimeout bounds how long Close lets in-flight attempts
	// finish before it aborts them and releases their leases.
	DefaultDrainTimeout = 10 * time.Second

	// MaxRetry is the seed's maxRetry: retries after the first attempt.
	MaxRetry = 5
	// MaxStoredResponseBody is how much of a reply's body is stored.
	MaxStoredResponseBody = 64 << 10
)

// Options configures a Service. Zero fields take the defaults above.
type Options struct {
	// RetryBase is the first retry delay; retry n waits RetryBase×2^(n-1)
	// (1, 2, 4, 8, 16 s with the default of 1 s).
	RetryBase time.Duration
	// AllowPrivate lets callbacks reach loopback, private and link-local
	// addresses (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate   bool
	Workers        int
	Lease          time.Duration
	AttemptTimeout time.Duration
	PollInterval   time.Duration
	DrainTimeout   time.Duration
	// Outbound are the limits of the HTTP client; zero: outbound.DefaultConfig.
	// Its Dialer is always replaced by the SSRF-guarded dialer.
	Outbound *outbound.Config
}

func (o *Options) defaults() {
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
}

// Service is the webhook outbox: it dispatches queued deliveries (Start,
// Close) and lets an operator re-queue them (Resend, ResendFailed). Events
// are queued with Enqueue inside the business transaction.
type Service struct {
	client  *ent.Client
	dialect string
	sealer  *secret.Sealer
	http    *outbound.Client
	log     *slog.Logger
	opt     Options

	// wake holds at most one pending wake-up of the dispatch loop.
	wake chan struct{}

	mu      sync.Mutex
	started bool
	d       *dispatcher
}

// NewService returns a Service over db; masterKey unseals the apps'
// webhook secrets. It registers a hook on db's client so that every
// delivery created through it wakes the dispatcher as soon as its
// transaction commits.
func NewService(db *store.DB, masterKey []byte, log *slog.Logger, opt Options) (*Service, error) {
	opt.defaults()
	if opt.Lease <= opt.AttemptTimeout {
		return nil, fmt.Errorf("webhook: lease (%s) must exceed the attempt timeout (%s)", opt.Lease, opt.AttemptTimeout)
	}
	sealer, err := secret.NewSealer(masterKey)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	ocfg := outbound.DefaultConfig()
	if opt.Outbound != nil {
		ocfg = *opt.Outbound
	}
	// Webhooks are POSTs with their own retry schedule: the client never
	// repeats them (it would not anyway, POST is not idempotent), and
	// attempts bypass the host's circuit breaker (see attempt).
	ocfg.RetryAttempts, ocfg.RetryWaits = 1, nil
	ocfg.Dialer = GuardedDialer(opt.AllowPrivate, &net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	hc, err := outbound.New(ocfg)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		client:  db.Client,
		dialect: db.Dialect,
		sealer:  sealer,
		http:    hc,
		log:     log,
		opt:     opt,
		wake:    make(chan struct{}, 1),
	}
	wakeOnCreate(db.Client, s.Notify)
	return s, nil
}

// Notify wakes the dispatcher: new work may be due. It never blocks.
func (s *Service) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start launches the dispatcher. It runs until Close; ctx is not used to
// stop it, so that shutdown can let attempts finish in order.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	s.d = newDispatcher(s)
	go s.d.run()
}

// Close stops claiming work, lets in-flight attempts finish for at most
// Options.DrainTimeout (or until ctx ends, whichever is first), then
// aborts the rest and releases their leases so another replica (or the
// next start) takes them over at once.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	d := s.d
	s.d = nil
	s.mu.Unlock()
	var err error
	if d != nil {
		err = d.shutdown(ctx)
	}
	s.http.Close()
	return err
}
