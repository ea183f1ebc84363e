// Package inventory is the stock domain: SKUs (created and set by the
// admin side) and the partner API's idempotent stock deduction.
//
// A deduction is exactly-once per business serial number (biz_no): the
// idempotency record and the stock change commit in one transaction, the
// stock is changed by a conditional UPDATE (stock >= quantity) so it never
// goes negative, and concurrent requests with one biz_no wait for the first
// and then answer as repeats of it. The rules are in deduct.go and
// docs/inventory.md; the REST layer (rest/partnerapi/inventory.go) only decodes,
// calls [Service.Deduct] and maps errors to the envelope.
package inventory

import (
	"sync"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/internal/combine"
	"gatehouse/internal/errs"
	"gatehouse/internal/store"
)

// Errors of the service, for errors.Is.
var (
	// ErrNotFound: no SKU has that id (SetStock; in a deduction it is the
	// "unknown SKU" outcome, 400/5002).
	ErrNotFound = errs.New(errs.NotFound, "sku not found")
	// ErrInsufficientStock: the SKU has less stock than the quantity
	// (409/5002 "insufficient stock"). The record is failed (2).
	ErrInsufficientStock = errs.New(errs.InvalidState, "insufficient stock")
	// ErrBusinessFailed: the biz_no was used before and that deduction
	// failed (409/5001 "business failed").
	ErrBusinessFailed = errs.New(errs.Conflict, "business failed")
	// ErrParamsMismatch: the biz_no was used before with another sku_id or
	// quantity (422/5002).
	ErrParamsMismatch = errs.New(errs.Conflict, "biz_no was already used with a different sku_id or quantity")
	// ErrForbidden: the biz_no belongs to another app (403/5003).
	ErrForbidden = errs.New(errs.Forbidden, "biz_no belongs to another app")
	// ErrInProgress: a deduction with this biz_no is still being processed
	// elsewhere and did not finish within the wait bound (409/6000, retry
	// later with the same biz_no).
	ErrInProgress = errs.New(errs.Conflict, "a deduction with this biz_no is still in progress")
)

// errUnknownSKU is a deduction's unknown SKU: to the caller a bad sku_id
// parameter (400/5002), and still ErrNotFound for errors.Is.
var errUnknownSKU = &errs.Error{Kind: errs.Validation, Field: "sku_id", Msg: "no such SKU", Err: ErrNotFound}

// Defaults of the service.
const (
	// DefaultInFlightWait bounds how long a request waits for a deduction
	// with the same biz_no that another process has recorded as processing
	// (status 0) to settle. See docs/inventory.md.
	DefaultInFlightWait = 5 * time.Second
	// DefaultWorkTimeout bounds one deduction's database work, within the
	// caller's own deadline. A cancelled deduction rolls back whole.
	DefaultWorkTimeout = 30 * time.Second
)

// Service creates SKUs, sets stock and deducts it. It is safe for
// concurrent use.
type Service struct {
	db           *store.DB
	q            queries
	now          func() time.Time
	inFlightWait time.Duration
	workTimeout  time.Duration

	postgres bool

	// combiners gather concurrent deductions into batches (combine.go).
	combiners []*combine.Combiner[*call]

	prepMu   sync.Mutex
	prepared *sqliteStatements // SQLite, prepared on first use
	// onInFlight, when set (tests), is called each time a record is seen in
	// status 0 while waiting for it to settle.
	onInFlight func(bizNo string)
	// onBatch, when set (tests), is called with the size of each batch
	// before it runs.
	onBatch func(size int)
}

// Option configures a Service.
type Option func(*Service)

// WithInFlightWait sets how long a request waits for a record another
// process holds in status 0 before answering ErrInProgress.
func WithInFlightWait(d time.Duration) Option { return func(s *Service) { s.inFlightWait = d } }

// WithClock replaces the clock used for record and SKU times and for the
// in-flight wait's deadline.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// NewService returns a Service over db (SQLite or Postgres).
func NewService(db *store.DB, opts ...Option) *Service {
	s := &Service{
		db:           db,
		q:            newQueries(db.Dialect == dialect.Postgres),
		postgres:     db.Dialect == dialect.Postgres,
		now:          time.Now,
		inFlightWait: DefaultInFlightWait,
		workTimeout:  DefaultWorkTimeout,
	}
	for _, o := range opts {
		o(s)
	}
	n := 1
	if s.postgres {
		n = postgresCombiners()
	}
	for range n {
		s.combiners = append(s.combiners, s.newCombiner())
	}
	return s
}
