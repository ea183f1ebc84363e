package inventory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/store"
)

// Statuses of an idempotency record (0 processing, 1 success, 2 failure).
const (
	StatusProcessing = 0
	StatusSucceeded  = 1
	StatusFailed     = 2
)

// Deduction is the data of a successful deduction, stored as the record's
// response_result and returned unchanged to every repeat.
type Deduction struct {
	BizNo          string `json:"biz_no"`
	SkuID          int    `json:"sku_id"`
	Quantity       int64  `json:"quantity"`
	RemainingStock int64  `json:"remaining_stock"`
}

// Result is the answer to a deduction request.
type Result struct {
	Deduction
	// Replayed is true when the deduction was made by an earlier request
	// with the same biz_no and this is its stored result.
	Replayed bool
}

// record is what a repeat is judged by.
type record struct {
	appKey string
	params string
	result sql.NullString
	status int
}

// errVanished: a record seen while it was processing disappeared (its
// writer rolled back); the request starts over.
var errVanished = errors.New("idempotency record vanished")

// Deduct deducts in.Quantity from SKU in.SkuID once per in.BizNo, for the
// app appKey (the authenticated caller). in normally comes from
// ParseDeduct; it is validated again (a validation error, nothing recorded).
//
// A new biz_no: the record (0) is inserted, the stock decremented only if
// enough remains, and the record marked 1 with the result stored, all in
// one transaction. Business failures commit the record as 2 and return
// ErrInsufficientStock or an unknown-SKU error (errors.Is ErrNotFound). An
// unexpected error raised by the business logic itself rolls the stock
// change back and commits the record as failed (2).
//
// A dependency failure before the outcome is committed (the database does
// not answer, the request's deadline passes, the client hangs up, a lock
// wait times out, the commit fails) rolls the whole transaction back: no
// record, no deduction. It wraps errs.Unavailable (503), and the same
// biz_no retried later runs anew. A record in status 0 therefore never
// outlives the request that wrote it.
//
// A biz_no seen before (including by a concurrent request, which waits for
// the first to commit): ErrForbidden if another app used it,
// ErrParamsMismatch if its SKU or quantity differ, ErrBusinessFailed if it
// failed, else its stored result with Replayed set. Nothing is deducted.
//
// The database work runs under ctx (the request's deadline and
// connection), bounded further by the service's work timeout.
func (s *Service) Deduct(ctx context.Context, appKey string, in DeductInput) (Result, error) {
	if err := in.validate(); err != nil {
		return Result{}, err
	}
	work, cancel := context.WithTimeout(ctx, s.workTimeout)
	defer cancel()
	for tries := 1; ; tries++ {
		res, existing, err := s.attempt(work, appKey, in)
		if err == nil && existing != nil {
			res, err = s.repeat(ctx, appKey, in, existing)
		}
		if errors.Is(err, errVanished) {
			if tries < 3 {
				continue
			}
			err = ErrInProgress
		}
		if err != nil {
			return Result{}, classify(err)
		}
		return res, nil
	}
}

// attempt runs the transaction of a new biz_no. When the biz_no exists
// (committed by another request, which a concurrent request waits for) it
// returns that record instead and changes nothing.
func (s *Service) attempt(ctx context.Context, appKey string, in DeductInput) (Result, *record, error) {
	now := s.now()
	tx, err := s.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		// Nothing was recorded or changed: a retry starts afresh.
		return Result{}, nil, fmt.Errorf("deduct: begin: %w", err)
	}
	var id int64
	err = tx.QueryRowContext(ctx, s.q.insertRecord, in.BizNo, appKey, in.apiPath(), in.snapshot(), now, now).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) { // the biz_no exists
		rec, err := readRecord(ctx, tx, s.q.selectRecord, in.BizNo)
		_ = tx.Rollback() // nothing was written
		if err == nil && rec == nil {
			err = errVanished // deleted since the insert met it
		}
		return Result{}, rec, err
	}
	if err != nil {
		_ = tx.Rollback()
		return Result{}, nil, fmt.Errorf("deduct: insert record: %w", err)
	}

	// The record exists in this transaction: it commits as 1 or 2 with
	// the outcome, or not at all.
	d, bizErr, workErr := s.work(ctx, tx, id, in, now)
	if workErr != nil {
		if dependencyFailure(ctx, workErr) {
			// Nothing was decided: nothing of this request remains, and a
			// retry with the same biz_no runs anew.
			_ = tx.Rollback()
			return Result{}, nil, unavailable(workErr)
		}
		// The business logic itself failed: undo the work (back to the
		// savepoint), keep the record, fail it, and commit that, so that
		// requests waiting for this biz_no see the failure.
		if err := s.failInTx(ctx, tx, id, now); err != nil {
			_ = tx.Rollback()
			return Result{}, nil, unavailable(fmt.Errorf("%w; recording the failure: %w", workErr, err))
		}
		if err := s.commit(tx, in.BizNo); err != nil {
			_ = tx.Rollback()
			return Result{}, nil, fmt.Errorf("%w (after %w)", err, workErr)
		}
		return Result{}, nil, workErr
	}
	if err := s.commit(tx, in.BizNo); err != nil {
		// Rolled back, or (if the commit did happen after all) the record
		// says 1 and a retry gets the stored result: either way, retrying
		// the same biz_no is safe.
		_ = tx.Rollback()
		return Result{}, nil, err
	}
	if bizErr != nil {
		return Result{}, nil, bizErr
	}
	return Result{Deduction: d}, nil, nil
}

// work is the business logic, behind a savepoint: the conditional
// decrement and the record's outcome. bizErr is a business failure
// (recorded as 2, nothing deducted); err an unexpected failure.
func (s *Service) work(ctx context.Context, tx *sql.Tx, id int64, in DeductInput, now time.Time) (d Deduction, bizErr, err error) {
	if _, err := tx.ExecContext(ctx, savepoint); err != nil {
		return d, nil, fmt.Errorf("deduct: savepoint: %w", err)
	}
	var remaining int64
	err = tx.QueryRowContext(ctx, s.q.decrement, in.Quantity, now, in.SkuID, in.Quantity).Scan(&remaining)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		var one int
		switch err := tx.QueryRowContext(ctx, s.q.skuExists, in.SkuID).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			bizErr = errUnknownSKU
		case err != nil:
			return d, nil, fmt.Errorf("deduct: look up sku: %w", err)
		default:
			bizErr = ErrInsufficientStock
		}
		if err := s.finish(ctx, tx, id, StatusFailed, nil, now); err != nil {
			return d, nil, err
		}
		return d, bizErr, nil
	case err != nil:
		return d, nil, fmt.Errorf("deduct: decrement stock: %w", err)
	}
	if err := s.fault(func(f *Faults) func(string) error { return f.AfterDecrement }, in.BizNo); err != nil {
		return d, nil, err
	}
	d = Deduction{BizNo: in.BizNo, SkuID: in.SkuID, Quantity: in.Quantity, RemainingStock: remaining}
	result, err := json.Marshal(d)
	if err != nil {
		return Deduction{}, nil, fmt.Errorf("deduct: encode result: %w", err)
	}
	res := string(result)
	if err := s.finish(ctx, tx, id, StatusSucceeded, &res, now); err != nil {
		return Deduction{}, nil, err
	}
	return d, nil, nil
}

func (s *Service) finish(ctx context.Context, tx *sql.Tx, id int64, status int, result *string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, s.q.finishRecord, status, result, now, id); err != nil {
		return fmt.Errorf("deduct: mark record %d: %w", status, err)
	}
	return nil
}

// failInTx undoes the business work and marks the record failed.
func (s *Service) failInTx(ctx context.Context, tx *sql.Tx, id int64, now time.Time) error {
	if _, err := tx.ExecContext(ctx, rollbackSavepoint); err != nil {
		return fmt.Errorf("rollback to savepoint: %w", err)
	}
	return s.finish(ctx, tx, id, StatusFailed, nil, now)
}

func (s *Service) commit(tx *sql.Tx, bizNo string) error {
	err := s.fault(func(f *Faults) func(string) error { return f.BeforeCommit }, bizNo)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return fmt.Errorf("%w: deduct: commit: %w", errs.Unavailable, err)
	}
	return nil
}

// dependencyFailure tells a failure of the database (or of the request
// that carries the work) from one of the business logic.
func dependencyFailure(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errs.KindOf(err) == errs.Unavailable || store.IsUnavailable(err)
}

// unavailable marks err as a dependency failure (503, retry later).
func unavailable(err error) error {
	if errs.KindOf(err) == errs.Unavailable {
		return err
	}
	return fmt.Errorf("%w: %w", errs.Unavailable, err)
}

// repeat answers a request whose biz_no has a record.
func (s *Service) repeat(ctx context.Context, appKey string, in DeductInput, rec *record) (Result, error) {
	if rec.appKey != appKey {
		return Result{}, ErrForbidden
	}
	same, err := in.sameRequest(rec.params)
	if err != nil {
		return Result{}, fmt.Errorf("deduct: request_params of biz_no %q: %w", in.BizNo, err)
	}
	if !same {
		return Result{}, ErrParamsMismatch
	}
	if rec.status == StatusProcessing {
		if rec, err = s.settled(ctx, in.BizNo); err != nil {
			return Result{}, err
		}
	}
	switch rec.status {
	case StatusSucceeded:
		var d Deduction
		if !rec.result.Valid {
			return Result{}, fmt.Errorf("deduct: succeeded record of biz_no %q has no result", in.BizNo)
		}
		if err := json.Unmarshal([]byte(rec.result.String), &d); err != nil {
			return Result{}, fmt.Errorf("deduct: result of biz_no %q: %w", in.BizNo, err)
		}
		return Result{Deduction: d, Replayed: true}, nil
	case StatusFailed:
		return Result{}, ErrBusinessFailed
	}
	return Result{}, fmt.Errorf("deduct: record of biz_no %q has status %d", in.BizNo, rec.status)
}

// settled waits, with a bounded poll, until the record of bizNo leaves
// status 0. Deductions of this service never commit a record in status 0
// (record and outcome commit together), so a record seen in 0 was written
// by another process that is still working or died: it is waited for up
// to the in-flight bound, then ErrInProgress. A record that disappears
// (its writer rolled back) is errVanished.
func (s *Service) settled(ctx context.Context, bizNo string) (*record, error) {
	deadline := s.now().Add(s.inFlightWait)
	delay := 5 * time.Millisecond
	for first := true; ; first = false {
		if !first {
			if s.onInFlight != nil {
				s.onInFlight(bizNo)
			}
			left := deadline.Sub(s.now())
			if left <= 0 {
				return nil, ErrInProgress
			}
			t := time.NewTimer(min(delay, left))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			delay = min(2*delay, 250*time.Millisecond)
		}
		rec, err := readRecord(ctx, s.db.SQL, s.q.selectRecord, bizNo)
		switch {
		case err != nil:
			return nil, err
		case rec == nil:
			return nil, errVanished
		case rec.status != StatusProcessing:
			return rec, nil
		}
	}
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readRecord returns the record of bizNo, or nil when there is none.
func readRecord(ctx context.Context, db queryRower, query, bizNo string) (*record, error) {
	var r record
	err := db.QueryRowContext(ctx, query, bizNo).Scan(&r.appKey, &r.params, &r.result, &r.status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("deduct: read record: %w", err)
	}
	return &r, nil
}

// classify marks errors that mean "the database did not answer" with
// errs.Unavailable (the REST layer answers 503 instead of 500).
func classify(err error) error { return store.Classify(err) }
