package inventory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// deduction is the success data of in leaving remaining in stock.
func (in DeductInput) deduction(remaining int64) Deduction {
	return Deduction{BizNo: in.BizNo, SkuID: in.SkuID, Quantity: in.Quantity, RemainingStock: remaining}
}

// resultPrefix is the stored result of in without the remaining stock and
// the closing brace, for the database to complete: byte for byte what
// json.Marshal(in.deduction(n)) gives (remaining_stock is the last field).
func (in DeductInput) resultPrefix() (string, error) {
	b, err := json.Marshal(in.deduction(0))
	if err != nil {
		return "", fmt.Errorf("deduct: encode result: %w", err)
	}
	prefix, ok := strings.CutSuffix(string(b), `"remaining_stock":0}`)
	if !ok {
		return "", fmt.Errorf("deduct: unexpected result encoding %s", b)
	}
	return prefix + `"remaining_stock":`, nil
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
// A new biz_no: the record and the outcome commit together, the stock
// decremented only if enough remains, the record stored as 1 with the
// result, or as 2 on a business failure (ErrInsufficientStock, or an
// unknown-SKU error for which errors.Is ErrNotFound holds). On Postgres
// this is one statement (the function gatehouse_deduct), on SQLite one
// transaction of two prepared statements. A deduction that arrives while
// others of its combiner are being committed waits and joins the next
// batch: one statement (gatehouse_deduct_batch) or one transaction for
// all of them, each with the outcome it would have had alone (see
// combiner and runBatch; docs/inventory.md, "Batches").
//
// A dependency failure before the outcome is committed (the database does
// not answer, the request's deadline passes, the client hangs up, a lock
// wait times out, the commit fails) leaves nothing: no record, no
// deduction. It wraps errs.Unavailable (503), and the same biz_no retried
// later runs anew. Any other database error rolls the deduction back and
// records the biz_no as failed (2), unless another request decided it
// meanwhile; it is returned as an unexpected error (500).
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
		c := &call{ctx: work, appKey: appKey, in: in}
		if err := work.Err(); err != nil {
			c.err = unavailable(err)
		} else {
			s.combinerFor(in.SkuID).Do(c)
		}
		if errors.Is(c.err, errRunAlone) {
			c.res, c.rec, c.err = s.attempt(work, appKey, in)
		}
		res, existing, err := c.res, c.rec, c.err
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

// attemptPostgres runs the deduction of a new biz_no as one statement, or
// returns the record when the biz_no exists (committed by another request,
// which the statement waits for if it is still running) and changes
// nothing.
//
// It is the path of a batch of one, and of a deduction whose batch failed
// with an unexpected error (errRunAlone).
//
// The statement carries the request's deadline: if the server runs it
// later (it received it but did not answer in time, or waited for a lock
// past the deadline), it raises query_canceled instead of committing, so
// that a caller told "nothing happened" is right.
func (s *Service) attemptPostgres(ctx context.Context, appKey string, in DeductInput) (Result, *record, error) {
	now := s.now()
	notAfter, ok := ctx.Deadline()
	if !ok {
		notAfter = time.Now().Add(s.workTimeout)
	}
	prefix, err := in.resultPrefix()
	if err != nil {
		return Result{}, nil, err
	}
	var (
		fresh     bool
		rec       record
		appK      sql.NullString
		params    sql.NullString
		remaining sql.NullInt64
		skuExists sql.NullBool
	)
	err = s.db.SQL.QueryRowContext(ctx, s.q.deduct, in.BizNo, appKey, in.apiPath(), in.snapshot(),
		in.SkuID, in.Quantity, now, prefix, notAfter).
		Scan(&fresh, &appK, &params, &rec.result, &rec.status, &remaining, &skuExists)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// The biz_no's record was there and disappeared before it could be
		// read (its writer rolled back): start over.
		return Result{}, nil, errVanished
	case err != nil:
		return Result{}, nil, s.failed(ctx, appKey, in, now, fmt.Errorf("deduct: %w", err))
	case !fresh:
		rec.appKey, rec.params = appK.String, params.String
		return Result{}, &rec, nil
	case rec.status == StatusSucceeded && remaining.Valid:
		return Result{Deduction: in.deduction(remaining.Int64)}, nil, nil
	case skuExists.Valid && !skuExists.Bool:
		return Result{}, nil, errUnknownSKU
	default:
		return Result{}, nil, ErrInsufficientStock
	}
}

// attempt runs the deduction of a new biz_no on its own (see attemptPostgres
// and attemptSQLite).
func (s *Service) attempt(ctx context.Context, appKey string, in DeductInput) (Result, *record, error) {
	if s.postgres {
		return s.attemptPostgres(ctx, appKey, in)
	}
	return s.attemptSQLite(ctx, appKey, in)
}

// attemptSQLite runs the deduction of a new biz_no as one transaction,
// holding this process's write turn (the database has one writer): the
// conditional decrement, then the record of its outcome. When the biz_no
// exists it returns the record instead and changes nothing.
func (s *Service) attemptSQLite(ctx context.Context, appKey string, in DeductInput) (Result, *record, error) {
	release, err := s.db.WriteTurn(ctx)
	if err != nil {
		return Result{}, nil, err
	}
	defer release()
	st, err := s.sqliteStatements(ctx)
	if err != nil {
		return Result{}, nil, err
	}
	now := s.now()
	tx, err := s.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		// Nothing was recorded or changed: a retry starts afresh.
		return Result{}, nil, fmt.Errorf("deduct: begin: %w", err)
	}
	res, rec, outcome, err := s.stepSQLite(ctx, tx, st, appKey, in, now)
	switch {
	case err != nil:
		// The transaction ends without a trace of this request and, for an
		// unexpected error, the failure is recorded (still holding the
		// turn, so no request of this process runs in between).
		_ = tx.Rollback()
		return Result{}, nil, s.failed(ctx, appKey, in, now, err)
	case rec != nil || errors.Is(outcome, errVanished):
		_ = tx.Rollback() // nothing was written
		return Result{}, rec, outcome
	}
	if err := commit(tx); err != nil {
		return Result{}, nil, err
	}
	return res, nil, outcome
}

// stepSQLite runs the deduction of in inside tx: the decrement and the
// record of a success, the record of a business failure (outcome
// ErrInsufficientStock or errUnknownSKU), or, when the biz_no has a record
// already, that record and nothing written (errVanished if it disappeared
// meanwhile). err is a failed statement: tx must be rolled back.
func (s *Service) stepSQLite(ctx context.Context, tx *sql.Tx, st *sqliteStatements, appKey string, in DeductInput, now time.Time) (res Result, rec *record, outcome, err error) {
	var remaining int64
	err = tx.StmtContext(ctx, st.decrement).QueryRowContext(ctx, in.Quantity, now, in.SkuID, in.Quantity, in.BizNo).Scan(&remaining)
	switch {
	case err == nil:
		d := in.deduction(remaining)
		result, err := json.Marshal(d)
		if err != nil {
			return Result{}, nil, nil, fmt.Errorf("deduct: encode result: %w", err)
		}
		if _, err := tx.StmtContext(ctx, st.insertSucceeded).ExecContext(ctx, in.BizNo, appKey, in.apiPath(), in.snapshot(), string(result), now, now); err != nil {
			return Result{}, nil, nil, fmt.Errorf("deduct: record success: %w", err)
		}
		return Result{Deduction: d}, nil, nil, nil
	case !errors.Is(err, sql.ErrNoRows):
		return Result{}, nil, nil, fmt.Errorf("deduct: decrement stock: %w", err)
	}
	// Nothing deducted: the biz_no has a record, or the stock or the SKU
	// is missing.
	var skus int
	err = tx.StmtContext(ctx, st.insertFailed).QueryRowContext(ctx, in.BizNo, appKey, in.apiPath(), in.snapshot(), now, now, in.SkuID).Scan(&skus)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		rec, err := readRecord(ctx, tx, s.q.selectRecord, in.BizNo)
		if err != nil {
			return Result{}, nil, nil, err
		}
		if rec == nil {
			return Result{}, nil, errVanished, nil
		}
		return Result{}, rec, nil, nil
	case err != nil:
		return Result{}, nil, nil, fmt.Errorf("deduct: record failure: %w", err)
	case skus == 0:
		return Result{}, nil, errUnknownSKU, nil
	}
	return Result{}, nil, ErrInsufficientStock, nil
}

// failed handles an error of a deduction's statement or transaction, which
// has rolled back. A dependency failure leaves nothing: the same biz_no
// retried later runs anew. Any other error is unexpected: the biz_no is
// recorded as failed (2) unless another request decided it meanwhile, and
// the error is returned (500).
func (s *Service) failed(ctx context.Context, appKey string, in DeductInput, now time.Time, err error) error {
	if dependencyFailure(ctx, err) {
		return s.dependencyError(err)
	}
	if _, rerr := s.db.SQL.ExecContext(ctx, s.q.recordFailure, in.BizNo, appKey, in.apiPath(), in.snapshot(), now, now); rerr != nil {
		return unavailable(fmt.Errorf("%w; recording the failure: %w", err, rerr))
	}
	return err
}

func commit(tx *sql.Tx) error {
	if err := tx.Commit(); err != nil {
		// Rolled back, or (if the commit did happen after all) the record
		// is there and a retry gets its outcome: either way, retrying the
		// same biz_no is safe.
		return fmt.Errorf("%w: deduct: commit: %w", errs.Unavailable, err)
	}
	return nil
}

// sqliteStatements are the SQLite statements of a deduction, prepared once
// (database/sql keeps each prepared on every connection that ran it).
type sqliteStatements struct {
	decrement, insertSucceeded, insertFailed *sql.Stmt
}

func (s *Service) sqliteStatements(ctx context.Context) (*sqliteStatements, error) {
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	if s.prepared != nil {
		return s.prepared, nil
	}
	var st sqliteStatements
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&st.decrement, s.q.decrement}, {&st.insertSucceeded, s.q.insertSucceeded}, {&st.insertFailed, s.q.insertFailed}} {
		stmt, err := s.db.SQL.PrepareContext(ctx, p.query)
		if err != nil {
			for _, done := range []*sql.Stmt{st.decrement, st.insertSucceeded, st.insertFailed} {
				if done != nil {
					_ = done.Close()
				}
			}
			return nil, fmt.Errorf("deduct: prepare: %w", err)
		}
		*p.stmt = stmt
	}
	s.prepared = &st
	return s.prepared, nil
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
