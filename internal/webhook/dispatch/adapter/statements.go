package adapter

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"gatehouse/internal/store"
)

// DBTime is how times the dispatcher compares are written: UTC with
// microseconds, the precision both databases keep, so that a value read
// back equals the value written (the lease doubles as a fencing token).
func DBTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// AttemptRow is one DeliveryAttempt as stored.
type AttemptRow struct {
	ReqHeaders  string
	ReqBody     string
	Status      sql.NullInt64
	RespHeaders sql.NullString
	RespBody    sql.NullString
	Err         sql.NullString
	DurationMs  int64
	StartedAt   time.Time
}

// OutcomeParams are the named parameters of the Statements that store an
// attempt's outcome: the attempt row (InsertAttempt) and the move of its
// delivery (MoveDelivery), both in RecordPostgres. args lists them in the
// order of RecordPostgres's placeholders $1-$16.
type OutcomeParams struct {
	DeliveryID int
	AttemptNo  int
	Attempt    AttemptRow
	// The delivery's new state (see sender.Verdict); NextAttemptAt is nil unless
	// RETRYING (the due time is kept).
	Status        string
	RetryCount    int
	NextAttemptAt *time.Time
	LastError     sql.NullString
	UpdateTime    time.Time
	// Lease is the claim's lease_until: the delivery moves only while it
	// is still this worker's.
	Lease time.Time
	// Handoff asks for the next due delivery of endpoint EndpointID to be
	// leased to the worker with the outcome (see the dispatcher's work).
	Handoff    bool
	EndpointID int
}

// args are RecordPostgres's parameters: the insert's ($1-$10), then the
// update's ($11-$16).
func (p OutcomeParams) Args() []any {
	a := p.Attempt
	return []any{p.DeliveryID, p.AttemptNo, a.ReqHeaders, a.ReqBody, a.Status, a.RespHeaders, a.RespBody, a.Err, a.DurationMs, a.StartedAt,
		p.Status, p.RetryCount, p.NextAttemptAt, p.LastError, p.UpdateTime, p.Lease}
}

// attemptArgs are InsertAttempt's parameters ($1-$10).
func (p OutcomeParams) AttemptArgs() []any { return p.Args()[:10] }

// moveArgs are MoveDelivery's parameters: $1 and $2 as in RecordPostgres,
// then its $3-$8.
func (p OutcomeParams) MoveArgs() []any {
	return []any{p.DeliveryID, p.AttemptNo, p.Status, p.RetryCount, p.NextAttemptAt, p.LastError, p.UpdateTime, p.Lease}
}

// RecordManyParams are RecordManyPostgres's parameters: one array per
// column of OutcomeParams, in args's order ($1-$16); element i of each is
// the i-th outcome's (null where OutcomeParams holds a null).
type RecordManyParams struct {
	DeliveryIDs, AttemptNos                 []int64
	RequestHeaders, RequestBodies           []string
	ResponseStatuses                        []*int64
	ResponseHeaders, ResponseBodies, Errors []*string
	DurationsMs                             []int64
	StartedAt                               []time.Time
	Statuses                                []string
	RetryCounts                             []int64
	NextAttemptAt                           []*time.Time
	LastErrors                              []*string
	UpdateTimes, Leases                     []time.Time
}

// ManyParams gathers the parameters of outcomes ps for RecordManyPostgres.
func ManyParams(ps ...OutcomeParams) RecordManyParams {
	var m RecordManyParams
	for _, p := range ps {
		a := p.Attempt
		m.DeliveryIDs = append(m.DeliveryIDs, int64(p.DeliveryID))
		m.AttemptNos = append(m.AttemptNos, int64(p.AttemptNo))
		m.RequestHeaders = append(m.RequestHeaders, a.ReqHeaders)
		m.RequestBodies = append(m.RequestBodies, a.ReqBody)
		var status *int64
		if a.Status.Valid {
			status = &a.Status.Int64
		}
		m.ResponseStatuses = append(m.ResponseStatuses, status)
		m.ResponseHeaders = append(m.ResponseHeaders, nullable(a.RespHeaders))
		m.ResponseBodies = append(m.ResponseBodies, nullable(a.RespBody))
		m.Errors = append(m.Errors, nullable(a.Err))
		m.DurationsMs = append(m.DurationsMs, a.DurationMs)
		m.StartedAt = append(m.StartedAt, a.StartedAt)
		m.Statuses = append(m.Statuses, p.Status)
		m.RetryCounts = append(m.RetryCounts, int64(p.RetryCount))
		m.NextAttemptAt = append(m.NextAttemptAt, p.NextAttemptAt)
		m.LastErrors = append(m.LastErrors, nullable(p.LastError))
		m.UpdateTimes = append(m.UpdateTimes, p.UpdateTime)
		m.Leases = append(m.Leases, p.Lease)
	}
	return m
}

func (m RecordManyParams) Args() []any {
	return []any{m.DeliveryIDs, m.AttemptNos, m.RequestHeaders, m.RequestBodies, m.ResponseStatuses, m.ResponseHeaders,
		m.ResponseBodies, m.Errors, m.DurationsMs, m.StartedAt, m.Statuses, m.RetryCounts, m.NextAttemptAt, m.LastErrors,
		m.UpdateTimes, m.Leases}
}

func nullable(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

// Statements runs the dispatcher's hot Statements prepared once per
// process (database/sql re-prepares them per connection as needed):
// SQLite would otherwise parse every statement on every call.
//
// Through a connection pooler nothing is prepared by name (a named
// statement would stay on whichever server connection the pooler lent):
// the Statements run as they are, and pgx runs them unnamed.
type Statements struct {
	db         *sql.DB
	unprepared bool
	mu         sync.Mutex
	m          map[string]*sql.Stmt
}

func NewStatements(db *store.DB) *Statements {
	return &Statements{db: db.SQL, unprepared: db.ThroughPooler(), m: map[string]*sql.Stmt{}}
}

func (p *Statements) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.m[q]; ok {
		return st, nil
	}
	st, err := p.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	p.m[q] = st
	return st, nil
}

// exec runs q, in tx when it is not nil.
func (p *Statements) Exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if p.unprepared {
		if tx != nil {
			return tx.ExecContext(ctx, q, args...)
		}
		return p.db.ExecContext(ctx, q, args...)
	}
	st, err := p.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	if tx != nil {
		st = tx.StmtContext(ctx, st)
	}
	return st.ExecContext(ctx, args...)
}

// query runs q in tx (prepared once, like exec).
func (p *Statements) Query(ctx context.Context, tx *sql.Tx, q string, args ...any) (*sql.Rows, error) {
	if p.unprepared {
		return tx.QueryContext(ctx, q, args...)
	}
	st, err := p.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
}

func (p *Statements) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (p *Statements) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for q, st := range p.m {
		_ = st.Close()
		delete(p.m, q)
	}
}
