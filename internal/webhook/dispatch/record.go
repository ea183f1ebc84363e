package dispatch

import (
	"context"
	"database/sql"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/internal/webhook/dispatch/adapter"
	"gatehouse/internal/webhook/sender"
)

// record stores attempt a of job j and moves the delivery as v says. It
// returns whether the delivery moved (the lease was still this worker's)
// and the attempt's number. With handoff, the next due delivery of j's
// endpoint may come back too, leased to the caller in the same write
// (see the dispatcher's work).
func (s *Dispatcher) record(ctx context.Context, j job, a adapter.AttemptRow, v sender.Verdict, handoff bool) (owned bool, no int, next *job, err error) {
	var nextAt *time.Time
	if v.Status == StatusRetrying {
		nextAt = &v.NextAttemptAt
	}
	params := func(no int) adapter.OutcomeParams {
		return adapter.OutcomeParams{
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

// recordAs runs the adapter.Statements with p (numbered already).
func (s *Dispatcher) recordAs(ctx context.Context, p adapter.OutcomeParams) (bool, error) {
	if s.db.Dialect == dialect.Postgres {
		res, err := s.sql.Exec(ctx, nil, adapter.RecordPostgres, p.Args()...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	}
	var owned bool
	err := s.sql.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.sql.Exec(ctx, tx, adapter.InsertAttempt, p.AttemptArgs()...); err != nil {
			return err
		}
		res, err := s.sql.Exec(ctx, tx, adapter.MoveDelivery, p.MoveArgs()...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		owned = n == 1
		return err
	})
	return owned, err
}

func (s *Dispatcher) recordNumbered(ctx context.Context, id int, params func(no int) adapter.OutcomeParams) (no int, owned bool, err error) {
	err = s.sql.InTx(ctx, func(tx *sql.Tx) error {
		var x int
		del := adapter.DeliveryParams{DeliveryID: id}
		if err := tx.QueryRowContext(ctx, adapter.LockDelivery(s.db.Dialect), del.Args()...).Scan(&x); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, adapter.LastAttemptNo, del.Args()...).Scan(&no); err != nil {
			return err
		}
		no++
		p := params(no)
		if _, err := tx.ExecContext(ctx, adapter.InsertAttempt, p.AttemptArgs()...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, adapter.MoveDelivery, p.MoveArgs()...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		owned = n == 1
		return err
	})
	return no, owned, err
}
