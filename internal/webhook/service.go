package webhook

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent"
	"gatehouse/internal/combine"
	"gatehouse/internal/errs"
	"gatehouse/internal/outbound"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/webhook/catalogue"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
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
	// for the response headers and the reading of the body (see sender).
	DefaultReplyTimeout = sender.DefaultReplyTimeout
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
	// Now is the service's one clock: due times, leases, signatures, rate
	// limits, the circuit breakers' open wait and the admin operations'
	// times (tests move it); default time.Now.
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

// Service is the webhook domain: the catalogue of event types, the apps'
// endpoints, publishing and fan-out, and the dispatcher that sends what
// is queued (Start, Close). Events are queued with Fanout inside the
// business transaction.
type Service struct {
	*catalogue.Catalogue
	*dispatch.Dispatcher
	// foreignWarned rate-limits the WARN of partners naming other apps'
	// ids (foreign.go): foreignKey → last time.
	foreignWarned sync.Map
	db            *store.DB
	client        *ent.Client
	sealer        *secret.Sealer
	log           *slog.Logger
	opt           Options
	send          *sender.Sender
	// pub groups concurrent single publishes (PublishShared).
	pub *combine.Combiner[*pubCall]
}

// NewService returns a Service over db; masterKey unseals the apps'
// webhook secrets. The hooks that wake the dispatchers when a delivery
// is queued are registered where the app is wired (WakeOnCommit).
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
	s := &Service{db: db, client: db.Client, sealer: sealer, log: log, opt: opt}
	if s.Catalogue, err = catalogue.New(db, opt.Now, dispatch.ExpectAlerts, opt.EventTypes); err != nil {
		return nil, err
	}
	s.send, err = sender.New(sender.Config{
		AllowPrivate: opt.AllowPrivate, LoopbackApps: opt.LoopbackApps, Outbound: opt.Outbound, Proxy: opt.Proxy, Now: opt.Now,
		OnBreaker: func(c *outbound.Client, key, from, to string) { s.BreakerChanged(c, key, from, to) },
	})
	if err != nil {
		return nil, err
	}
	s.Dispatcher = dispatch.New(db, sealer, s.send, log, s.dispatchConfig())
	s.pub = s.newPubCombiner()
	return s, nil
}

// dispatchConfig is the dispatcher's part of the options.
func (s *Service) dispatchConfig() dispatch.Config {
	o := s.opt
	return dispatch.Config{
		RetryBase: o.RetryBase, Workers: o.Workers, PerApp: o.PerApp, Lease: o.Lease,
		AttemptTimeout: o.AttemptTimeout, PollInterval: o.PollInterval, DrainTimeout: o.DrainTimeout,
		Retention: o.Retention, RetentionEvery: o.RetentionEvery, RetentionBatch: o.RetentionBatch,
		Tracing: o.Tracing, Now: o.Now,
		PurgePublications: s.purgePublications, DisableEndpoint: s.autoDisable,
	}
}

// CheckCallbackURL is the check a callback URL of app appKey must pass
// when it is registered: sender.ValidateCallbackURL, with loopback allowed for
// LoopbackApps.
func (s *Service) CheckCallbackURL(appKey, u string) error { return s.send.CheckCallbackURL(appKey, u) }

// now is the service's clock, in the form stored in the database.
func (s *Service) now() time.Time { return dbTime(s.opt.Now()) }
