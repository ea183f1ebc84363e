package dispatch

import (
	"gatehouse/internal/webhook/sender"

	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/internal/store"
)

// attemptRow is one DeliveryAttempt as stored.
type attemptRow struct {
	reqHeaders  string
	reqBody     string
	status      sql.NullInt64
	respHeaders sql.NullString
	respBody    sql.NullString
	err         sql.NullString
	durationMs  int64
	startedAt   time.Time
}

// outcomeParams are the named parameters of the statements that store an
// attempt's outcome: the attempt row (insertAttempt) and the move of its
// delivery (moveDelivery), both in recordPostgres. args lists them in the
// order of recordPostgres's placeholders $1-$16.
type outcomeParams struct {
	DeliveryID int
	AttemptNo  int
	Attempt    attemptRow
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

// args are recordPostgres's parameters: the insert's ($1-$10), then the
// update's ($11-$16).
func (p outcomeParams) args() []any {
	a := p.Attempt
	return []any{p.DeliveryID, p.AttemptNo, a.reqHeaders, a.reqBody, a.status, a.respHeaders, a.respBody, a.err, a.durationMs, a.startedAt,
		p.Status, p.RetryCount, p.NextAttemptAt, p.LastError, p.UpdateTime, p.Lease}
}

// attemptArgs are insertAttempt's parameters ($1-$10).
func (p outcomeParams) attemptArgs() []any { return p.args()[:10] }

// moveArgs are moveDelivery's parameters: $1 and $2 as in recordPostgres,
// then its $3-$8.
func (p outcomeParams) moveArgs() []any {
	return []any{p.DeliveryID, p.AttemptNo, p.Status, p.RetryCount, p.NextAttemptAt, p.LastError, p.UpdateTime, p.Lease}
}

// recordManyParams are recordManyPostgres's parameters: one array per
// column of outcomeParams, in args's order ($1-$16); element i of each is
// the i-th outcome's (null where outcomeParams holds a null).
type recordManyParams struct {
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

// manyParams gathers the parameters of outcomes ps for recordManyPostgres.
func manyParams(ps ...outcomeParams) recordManyParams {
	var m recordManyParams
	for _, p := range ps {
		a := p.Attempt
		m.DeliveryIDs = append(m.DeliveryIDs, int64(p.DeliveryID))
		m.AttemptNos = append(m.AttemptNos, int64(p.AttemptNo))
		m.RequestHeaders = append(m.RequestHeaders, a.reqHeaders)
		m.RequestBodies = append(m.RequestBodies, a.reqBody)
		var status *int64
		if a.status.Valid {
			status = &a.status.Int64
		}
		m.ResponseStatuses = append(m.ResponseStatuses, status)
		m.ResponseHeaders = append(m.ResponseHeaders, nullable(a.respHeaders))
		m.ResponseBodies = append(m.ResponseBodies, nullable(a.respBody))
		m.Errors = append(m.Errors, nullable(a.err))
		m.DurationsMs = append(m.DurationsMs, a.durationMs)
		m.StartedAt = append(m.StartedAt, a.startedAt)
		m.Statuses = append(m.Statuses, p.Status)
		m.RetryCounts = append(m.RetryCounts, int64(p.RetryCount))
		m.NextAttemptAt = append(m.NextAttemptAt, p.NextAttemptAt)
		m.LastErrors = append(m.LastErrors, nullable(p.LastError))
		m.UpdateTimes = append(m.UpdateTimes, p.UpdateTime)
		m.Leases = append(m.Leases, p.Lease)
	}
	return m
}

func (m recordManyParams) args() []any {
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

// record stores attempt a of job j and moves the delivery as v says. It
// returns whether the delivery moved (the lease was still this worker's)
// and the attempt's number. With handoff, the next due delivery of j's
// endpoint may come back too, leased to the caller in the same write
// (see the dispatcher's work).
func (s *Dispatcher) record(ctx context.Context, j job, a attemptRow, v sender.Verdict, handoff bool) (owned bool, no int, next *job, err error) {
	var nextAt *time.Time
	if v.Status == StatusRetrying {
		nextAt = &v.NextAttemptAt
	}
	params := func(no int) outcomeParams {
		return outcomeParams{
			DeliveryID: j.ID, AttemptNo: no, Attempt: a,
			Status: string(v.Status), RetryCount: v.RetryCount, NextAttemptAt: nextAt,
			LastError:  sql.NullString{String: v.LastError, Valid: v.LastError != ""},
			UpdateTime: s.now(), Lease: j.Lease, EndpointID: j.EndpointID,
		}
	}
	no = j.AttemptCount + 1
	if w := s.writer(); w != nil {
		p := params(no)
		p.Handoff = handoff && j.EndpointID != 0
		res := w.store(p)
		owned, next, err = res.owned, res.next, res.err
	} else {
		owned, err = s.recordAs(ctx, params(no))
	}
	if err == nil {
		return owned, no, next, nil
	}
	// Number it after the last stored attempt, in a transaction that reads
	// and writes under one lock (Postgres: the delivery row's).
	for range 3 {
		var n int
		n, owned, err = s.recordNumbered(ctx, j.ID, params)
		if err == nil {
			return owned, n, nil, nil
		}
	}
	return false, 0, nil, err
}

// recordAs runs the statements with p (numbered already).
func (s *Dispatcher) recordAs(ctx context.Context, p outcomeParams) (bool, error) {
	if s.db.Dialect == dialect.Postgres {
		res, err := s.sql.exec(ctx, nil, recordPostgres, p.args()...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	}
	var owned bool
	err := s.sql.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.sql.exec(ctx, tx, insertAttempt, p.attemptArgs()...); err != nil {
			return err
		}
		res, err := s.sql.exec(ctx, tx, moveDelivery, p.moveArgs()...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		owned = n == 1
		return err
	})
	return owned, err
}

func (s *Dispatcher) recordNumbered(ctx context.Context, id int, params func(no int) outcomeParams) (no int, owned bool, err error) {
	err = s.sql.inTx(ctx, func(tx *sql.Tx) error {
		var x int
		del := deliveryParams{DeliveryID: id}
		if err := tx.QueryRowContext(ctx, lockDelivery(s.db.Dialect), del.args()...).Scan(&x); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, lastAttemptNo, del.args()...).Scan(&no); err != nil {
			return err
		}
		no++
		p := params(no)
		if _, err := tx.ExecContext(ctx, insertAttempt, p.attemptArgs()...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, moveDelivery, p.moveArgs()...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		owned = n == 1
		return err
	})
	return no, owned, err
}

// statements runs the dispatcher's hot statements prepared once per
// process (database/sql re-prepares them per connection as needed):
// SQLite would otherwise parse every statement on every call.
//
// Through a connection pooler nothing is prepared by name (a named
// statement would stay on whichever server connection the pooler lent):
// the statements run as they are, and pgx runs them unnamed.
type statements struct {
	db         *sql.DB
	unprepared bool
	mu         sync.Mutex
	m          map[string]*sql.Stmt
}

func newStatements(db *store.DB) *statements {
	return &statements{db: db.SQL, unprepared: db.ThroughPooler(), m: map[string]*sql.Stmt{}}
}

func (p *statements) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
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
func (p *statements) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
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
func (p *statements) query(ctx context.Context, tx *sql.Tx, q string, args ...any) (*sql.Rows, error) {
	if p.unprepared {
		return tx.QueryContext(ctx, q, args...)
	}
	st, err := p.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
}

func (p *statements) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
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

func (p *statements) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for q, st := range p.m {
		_ = st.Close()
		delete(p.m, q)
	}
}
