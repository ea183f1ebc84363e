package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent"
	"gatehouse/internal/audit"
	"gatehouse/internal/errs"
	"gatehouse/internal/outbound"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/telemetry"
)

// Errors of the operator's operations, for errors.Is.
var (
	// ErrNotFound means no webhook delivery (or, for ResendFailed, no
	// partner app) has the given id.
	ErrNotFound = errs.New(errs.NotFound, "webhook delivery not found")
	// ErrAppNotFound means no partner app has the given id (SendTest).
	ErrAppNotFound = errs.New(errs.NotFound, "partner app not found")
	// ErrEndpointNotFound means no webhook endpoint (of that app) has the
	// given id.
	ErrEndpointNotFound = errs.New(errs.NotFound, "webhook endpoint not found")
	// ErrInvalidState means the delivery or app is not in a state that
	// allows the operation (cancelling a delivery that is already final,
	// testing an app without a callback URL). The errors returned carry
	// their own message (see invalidState).
	ErrInvalidState = errs.New(errs.InvalidState, "not possible in this state")
)

// invalidState is an ErrInvalidState error with a message of its own.
func invalidState(format string, args ...any) error {
	return &errs.Error{Kind: errs.InvalidState, Msg: fmt.Sprintf(format, args...), Err: ErrInvalidState}
}

// Defaults of the Options that are not settings (the settings among them,
// RetryBase, PerApp and Retention, have the configuration's defaults
// only: see Options).
const (
	// DefaultWorkers is the number of attempts one process runs at once.
	DefaultWorkers = 16
	// DefaultLease is how long a claimed delivery belongs to its worker. It
	// must exceed AttemptTimeout plus the time to store the outcome; after a
	// crash the delivery is picked up again once it has run out.
	DefaultLease = 30 * time.Second
	// DefaultAttemptTimeout bounds one HTTP attempt, body read included:
	// the connect timeout (3 s) and then DefaultReplyTimeout.
	DefaultAttemptTimeout = 8 * time.Second
	// DefaultReplyTimeout bounds, once the connection is open, the wait
	// for the response headers and the reading of up to
	// MaxStoredResponseBody of the body together: a receiver dripping its
	// reply is cut there (a 2xx still counts as success).
	DefaultReplyTimeout = 5 * time.Second
	// DefaultPollInterval is the longest the dispatcher sleeps without
	// looking at the table: it finds leases left behind by crashed
	// replicas (and, should a notification be lost, work queued by
	// others). Work queued in this process wakes it at once, and on
	// Postgres work queued by any replica too (LISTEN/NOTIFY).
	DefaultPollInterval = time.Second
	// PollWithoutListen is the poll interval on Postgres without a session
	// connection to LISTEN on (through a transaction pooler without
	// GATEHOUSE_DATABASE_DIRECT_URL): work queued by other replicas is
	// found within it.
	PollWithoutListen = 500 * time.Millisecond
	// DefaultDrainTimeout bounds how long Close lets in-flight attempts
	// finish before it aborts them and releases their leases.
	DefaultDrainTimeout = 10 * time.Second

	// MaxRetry is the message's maxRetry on the default schedule: retries
	// after the first attempt (an endpoint's retry schedule has its own,
	// see maxRetryOf).
	MaxRetry = 5
	// MaxStoredResponseBody is how much of a reply's body is stored.
	MaxStoredResponseBody = 64 << 10
)

// Options configures a Service. RetryBase, PerApp and Retention are
// settings (GATEHOUSE_WEBHOOK_*, declared in internal/config with their
// defaults): they are given, never defaulted here, and NewService refuses
// a RetryBase or PerApp left zero. Other zero fields take the defaults
// above.
type Options struct {
	// RetryBase is the first retry delay; retry n waits RetryBase×2^(n-1)
	// (1, 2, 4, 8, 16 s with the setting's default of 1 s).
	RetryBase time.Duration
	// AllowPrivate lets callbacks reach loopback, private and link-local
	// addresses (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
	// LoopbackApps are app keys whose callbacks may reach loopback
	// addresses (and no other private ones) even without AllowPrivate: the
	// demo app of `serve --demo`, so that a newcomer sees a delivery arrive
	// on their machine. Their attempts go through a client of their own,
	// so a connection they open is never reused for another app.
	LoopbackApps []string
	Workers      int
	// PerApp caps the attempts of one app in flight at once, over all
	// replicas; the other workers serve other apps.
	PerApp         int
	Lease          time.Duration
	AttemptTimeout time.Duration
	PollInterval   time.Duration
	DrainTimeout   time.Duration
	// Retention is how long deliveries in a final state (and their
	// attempts) are kept; 0 keeps them forever (as the setting's 0 does).
	Retention time.Duration
	// RetentionEvery is the pause between two runs of the retention job;
	// RetentionBatch the deliveries one statement deletes.
	RetentionEvery time.Duration
	RetentionBatch int
	// Outbound are the limits of the HTTP client; zero: outbound.DefaultConfig.
	// Its Dialer is always replaced by the SSRF-guarded dialer.
	Outbound *outbound.Config
	// Proxy is the HTTP CONNECT proxy every attempt goes through
	// (GATEHOUSE_WEBHOOK_PROXY, see ParseProxyURL); empty: attempts
	// connect directly. The URL guard still checks each target.
	Proxy string
	// Tracing makes a span per attempt (nil: off).
	Tracing *telemetry.Tracing
	// EventTypes are the built-in event types, declared by the domains
	// that raise them (order.EventTypes); webhook.test is always there.
	// With the custom types of the database they make the catalogue.
	EventTypes []EventType
	// Now is the clock of due times, leases and the circuit breakers' open
	// wait (tests move it); default time.Now.
	Now func() time.Time
}

// check refuses the settings a caller left out or made up: they have no
// default here.
func (o *Options) check() error {
	switch {
	case o.RetryBase <= 0:
		return fmt.Errorf("webhook: RetryBase %s: must be positive", o.RetryBase)
	case o.PerApp <= 0:
		return fmt.Errorf("webhook: PerApp %d: must be at least 1", o.PerApp)
	case o.Retention < 0:
		return fmt.Errorf("webhook: Retention %s: must be 0 (forever) or positive", o.Retention)
	}
	return nil
}

func (o *Options) defaults() {
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
	if o.RetentionEvery <= 0 {
		o.RetentionEvery = time.Minute
	}
	if o.RetentionBatch <= 0 {
		o.RetentionBatch = 500
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Service is the webhook outbox: it dispatches queued deliveries (Start,
// Close), purges old ones, and lets an operator re-queue, cancel and test
// them. Events are queued with Enqueue inside the business transaction.
type Service struct {
	// foreignWarned rate-limits the WARN of partners naming other apps'
	// ids (foreign.go): foreignKey → last time.
	foreignWarned sync.Map
	db            *store.DB
	client        *ent.Client
	sealer        *secret.Sealer
	log           *slog.Logger
	opt           Options
	// http sends every attempt, through the SSRF-guarded dialer; loopHTTP
	// sends those of LoopbackApps (nil when there are none).
	http     *outbound.Client
	loopHTTP *outbound.Client
	loopback map[string]bool
	// apps caches endpoints' secrets (by endpoint id); limits are the
	// endpoints' delivery rate limiters.
	apps   *appCache
	limits *limiters
	sql    *statements
	types  *catalogue
	// pub groups concurrent single publishes (PublishShared).
	pub *pubCombiners
	// audit records AutoDisable's changes (SetAudit; nil: none).
	audit atomic.Pointer[audit.Service]

	// wake holds at most one pending wake-up of the dispatch loop.
	wake chan struct{}
	// handoffs counts the deliveries workers took by hand-off (see the
	// dispatcher's work), for tests.
	handoffs atomic.Int64

	// announcing holds the open transactions that queued work and will
	// announce it at their commit (see watch).
	announcing txSet

	mu      sync.Mutex
	started bool
	d       *dispatcher
	out     *outcomeWriter
	bg      context.CancelFunc // stops LISTEN and retention
	bgDone  sync.WaitGroup
}

// NewService returns a Service over db; masterKey unseals the apps'
// webhook secrets. It registers hooks on db's client so that every
// delivery created through it wakes the dispatchers (this process at
// once, every replica on Postgres) as soon as its transaction commits.
func NewService(db *store.DB, masterKey []byte, log *slog.Logger, opt Options) (*Service, error) {
	if opt.PollInterval <= 0 && db.Dialect == dialect.Postgres && !db.CanListen() {
		opt.PollInterval = PollWithoutListen
	}
	if err := opt.check(); err != nil {
		return nil, err
	}
	opt.defaults()
	if opt.Lease <= opt.AttemptTimeout {
		return nil, fmt.Errorf("webhook: lease (%s) must exceed the attempt timeout (%s)", opt.Lease, opt.AttemptTimeout)
	}
	if opt.PerApp > opt.Workers {
		opt.PerApp = opt.Workers
	}
	sealer, err := secret.NewSealer(masterKey)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		db:       db,
		client:   db.Client,
		sealer:   sealer,
		log:      log,
		opt:      opt,
		loopback: make(map[string]bool),
		wake:     make(chan struct{}, 1),
	}
	var proxy *url.URL
	if opt.Proxy != "" {
		if proxy, err = outbound.ParseProxyURL(opt.Proxy); err != nil {
			return nil, fmt.Errorf("webhook: proxy URL %w", err)
		}
	}
	refuse := forbidden
	if opt.AllowPrivate {
		refuse = nil
	}
	if s.http, err = s.newClient(dialVia(proxy, refuse)); err != nil {
		return nil, err
	}
	for _, k := range opt.LoopbackApps {
		s.loopback[k] = true
	}
	if len(s.loopback) > 0 && !opt.AllowPrivate {
		if s.loopHTTP, err = s.newClient(dialVia(proxy, forbiddenButLoopback)); err != nil {
			return nil, err
		}
	}
	if s.types, err = newCatalogue(db.Client, opt.EventTypes); err != nil {
		return nil, err
	}
	s.apps = newAppCache(s.loadEndpoint)
	s.limits = newLimiters()
	s.sql = newStatements(db)
	s.pub = s.newPubCombiners()
	s.watch()
	registerBreakers(s)
	backlog.add(s)
	return s, nil
}

func dialer() *net.Dialer { return &net.Dialer{KeepAlive: 30 * time.Second, Resolver: resolver} }

// resolver looks up callback hosts: nil, the system's. Tests whose hosts
// must fail to resolve set one that never leaves the machine.
var resolver *net.Resolver

// dialVia is how attempts connect: through proxy (nil: directly), never
// to an address refuse refuses (nil: none is).
func dialVia(proxy *url.URL, refuse func(netip.Addr) bool) outbound.DialFunc {
	switch {
	case proxy != nil && refuse == nil:
		return outbound.ProxyDialer(proxy, nil, dialer())
	case proxy != nil:
		return outbound.ProxyDialer(proxy, func(a netip.Addr) error {
			if refuse(a) {
				return fmt.Errorf("%w: %s", ErrForbiddenAddress, a)
			}
			return nil
		}, dialer())
	case refuse == nil:
		return dialer().DialContext
	}
	return guard(dialer(), refuse).DialContext
}

// clientConfig is the outbound configuration of attempts: Options.Outbound
// (default: the outbound limits, connect 3 s), never retried by the
// client, with the reply bounded by DefaultReplyTimeout unless it says
// otherwise.
func (s *Service) clientConfig() outbound.Config {
	cfg := outbound.DefaultConfig()
	if s.opt.Outbound != nil {
		cfg = *s.opt.Outbound
	}
	// Webhooks are POSTs with their own retry schedule: the client never
	// repeats them (it would not anyway, POST is not idempotent).
	cfg.RetryAttempts, cfg.RetryWaits = 1, nil
	// The breaker judges a full window of 10 attempts (as for every
	// outbound call): a delivery on the default schedule (6 attempts)
	// never opens its endpoint's breaker by itself, so that schedule stays
	// 1, 2, 4, 8, 16 × base. A longer retry schedule (up to 20 attempts)
	// can: its later retries then wait for the half-open time, using no
	// attempt, as everyone's do.
	if cfg.ReplyTimeout == 0 {
		cfg.ReplyTimeout = DefaultReplyTimeout
	}
	return cfg
}

// newClient builds an HTTP client for attempts: the outbound limits and
// a breaker per callback endpoint, dialing with dial (an SSRF guard).
func (s *Service) newClient(dial outbound.DialFunc) (*outbound.Client, error) {
	cfg := s.clientConfig()
	cfg.Dialer = dial
	var hc *outbound.Client
	hc, err := outbound.New(cfg, outbound.WithClock(s.opt.Now), outbound.WithStateListener(func(key, from, to string) {
		s.breakerChanged(hc, key, from, to) // never before New returned: no call has been made
	}))
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return hc, nil
}

// CheckCallbackURL is the check a callback URL of app appKey must pass
// when it is registered: ValidateCallbackURL, with loopback allowed for
// LoopbackApps.
func (s *Service) CheckCallbackURL(appKey, u string) error {
	if s.loopback[appKey] && !s.opt.AllowPrivate {
		return ValidateLoopbackCallbackURL(u)
	}
	return ValidateCallbackURL(u, s.opt.AllowPrivate)
}

// now is the service's clock, in the form stored in the database.
func (s *Service) now() time.Time { return dbTime(s.opt.Now()) }

// writer is the outcome writer while the dispatcher runs.
func (s *Service) writer() *outcomeWriter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out
}

// PollInterval is the longest the dispatcher sleeps without looking at
// the table (Options.PollInterval, or its default for the database).
func (s *Service) PollInterval() time.Duration { return s.opt.PollInterval }

// Notify wakes the dispatcher: new work may be due. It never blocks.
func (s *Service) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start launches the dispatcher, the retention job and, on Postgres, the
// LISTEN connection that wakes the dispatcher when any replica queues
// work. They run until Close; ctx is not used to stop them, so that
// shutdown can let attempts finish in order.
func (s *Service) Start() {
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
// Options.DrainTimeout (or until ctx ends, whichever is first), then
// aborts the rest and releases their leases so another replica (or the
// next start) takes them over at once.
func (s *Service) Close(ctx context.Context) error {
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
	s.http.Close()
	if s.loopHTTP != nil {
		s.loopHTTP.Close()
	}
	unregisterBreakers(s)
	backlog.remove(s)
	s.sql.close()
	return err
}
