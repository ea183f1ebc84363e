// Package audit is the admin audit trail: one AuditEvent per admin
// mutation, successful or refused, saying which API key asked for what,
// on which target, when, and how it ended. Events are appended and never
// changed; a retention job deletes those older than the retention
// (GATEHOUSE_AUDIT_RETENTION). The GraphQL layer records the events (one
// middleware around every mutation); this package stores and purges them.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/ent"
	"gatehouse/ent/auditevent"
	"gatehouse/ent/hook"
	"gatehouse/internal/store"
)

// Outcome is how a mutation ended.
type Outcome = auditevent.Outcome

// The outcomes: SUCCESS; REFUSED when the caller was told no (FORBIDDEN,
// VALIDATION_FAILED, NOT_FOUND, CONFLICT, INVALID_STATE, …); FAILED when
// the service could not do it (INTERNAL, UNAVAILABLE).
const (
	Success = auditevent.OutcomeSUCCESS
	Refused = auditevent.OutcomeREFUSED
	Failed  = auditevent.OutcomeFAILED
)

// Event is one mutation as recorded. It holds no argument values beyond
// the target's id: never a secret, password or key.
type Event struct {
	Time       time.Time
	APIKeyID   int
	APIKeyName string
	Mutation   string
	TargetType string
	TargetID   string
	Outcome    Outcome
	ErrorCode  string
	RequestID  string
}

// ErrAppendOnly is returned for any attempt to change or delete an audit
// event other than by the retention job.
var ErrAppendOnly = errors.New("audit events are append-only")

// Options configure the Service.
type Options struct {
	// Retention is how long events are kept, 0 forever: the setting
	// GATEHOUSE_AUDIT_RETENTION as it is, whose declaration in
	// internal/config holds the only default.
	Retention time.Duration
	// RetentionEvery is the pause between two runs of the retention job
	// and RetentionBatch the events one statement deletes: no settings,
	// the job's own pace (zero: retentionEvery, retentionBatch); tests
	// quicken it.
	RetentionEvery time.Duration
	RetentionBatch int
	// Now is the clock (tests; nil: time.Now).
	Now func() time.Time
}

const (
	// retentionEvery and retentionBatch are the retention job's pace.
	retentionEvery = 10 * time.Minute
	retentionBatch = 500
	// writeTimeout bounds the write of one event, which outlives the
	// request that caused it (a cut-off request is still recorded).
	writeTimeout = 5 * time.Second
)

// recordFailures counts events that could not be stored (each is logged
// in full instead).
var recordFailures = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "gatehouse_audit_record_failures_total",
	Help: "Admin audit events that could not be stored (each is logged at ERROR instead).",
})

func init() { prometheus.MustRegister(recordFailures) }

// Service records and purges audit events. It is safe for concurrent use.
type Service struct {
	db      *store.DB
	log     *slog.Logger
	opt     Options
	refused refusedLimit
}

// NewService returns the audit trail over db. It makes the AuditEvent
// table append-only for every user of db's client: updates and deletes
// are refused, except the retention job's. A negative Retention is
// refused (forever is 0).
func NewService(db *store.DB, log *slog.Logger, opt Options) (*Service, error) {
	if opt.Retention < 0 {
		return nil, fmt.Errorf("audit: Retention %s: must be 0 (forever) or positive", opt.Retention)
	}
	if opt.RetentionEvery <= 0 {
		opt.RetentionEvery = retentionEvery
	}
	if opt.RetentionBatch <= 0 {
		opt.RetentionBatch = retentionBatch
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	db.AuditEvent.Use(appendOnly)
	return &Service{db: db, log: log, opt: opt}, nil
}

type purgeKey struct{}

// appendOnly refuses every change to audit events but creation, and the
// deletes of the retention job (marked in their context).
func appendOnly(next ent.Mutator) ent.Mutator {
	return hook.AuditEventFunc(func(ctx context.Context, m *ent.AuditEventMutation) (ent.Value, error) {
		switch {
		case m.Op().Is(ent.OpCreate):
		case m.Op().Is(ent.OpDelete) && ctx.Value(purgeKey{}) != nil:
		default:
			return nil, fmt.Errorf("%w: %s refused", ErrAppendOnly, m.Op())
		}
		return next.Mutate(ctx, m)
	})
}

// Record appends e. It runs on its own deadline, detached from ctx's
// cancellation, so that a mutation cut off by its request's deadline is
// still recorded. When the event cannot be stored it is logged in full at
// ERROR (it holds no secret) and counted, and the error is returned.
// Refused events are limited per API key (see RefusedBurst): those over
// the limit are counted and not stored, and Record returns nil.
func (s *Service) Record(ctx context.Context, e Event) error {
	if e.Time.IsZero() {
		e.Time = s.opt.Now()
	}
	if !s.admitRefused(ctx, e) {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	_, err := s.db.AuditEvent.Create().
		SetTime(e.Time).
		SetAPIKeyID(e.APIKeyID).
		SetAPIKeyName(clip(e.APIKeyName, 4*128)).
		SetMutation(clip(e.Mutation, 128)).
		SetNillableTargetType(orNil(clip(e.TargetType, 64))).
		SetNillableTargetID(orNil(clip(e.TargetID, 128))).
		SetOutcome(e.Outcome).
		SetNillableErrorCode(orNil(clip(e.ErrorCode, 64))).
		SetNillableRequestID(orNil(clip(e.RequestID, 64))).
		Save(wctx)
	if err != nil {
		recordFailures.Inc()
		s.log.ErrorContext(ctx, "audit: could not store the event of an admin mutation",
			"err", err, "mutation", e.Mutation, "api_key_id", e.APIKeyID, "api_key_name", e.APIKeyName,
			"target_type", e.TargetType, "target_id", e.TargetID, "outcome", string(e.Outcome),
			"error_code", e.ErrorCode, "request_id", e.RequestID)
		return fmt.Errorf("audit: record %s: %w", e.Mutation, err)
	}
	return nil
}

// orNil is nil for "" (the column is then NULL, GraphQL null).
func orNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// clip shortens s to at most n bytes on a character boundary (the columns
// are bounded; a long value must not lose the whole event).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
