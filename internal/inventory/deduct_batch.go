package inventory

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"gatehouse/internal/combine"
)

// errRunAlone: the batch a deduction was in failed with an error of the
// database that is not a dependency failure, and was rolled back whole; the
// deduction runs again on its own, where such an error is handled (and
// recorded) for the one request it belongs to.
var errRunAlone = errors.New("deduct: run alone")

// Combiners per store. On Postgres, calls are spread over two combiners
// per CPU by SKU id: those of one SKU, which would queue on its row lock
// anyway, always meet in one combiner; deductions of different SKUs that
// arrive while their combiner's batch is being committed join its next
// batch instead of each paying a commit of its own, and a few batches
// are in the database at once. With one combiner per SKU (1 024 of them)
// concurrent deductions of 100 SKUs almost never met and the phase held
// 0.72–0.79 of a plain UPDATE per request; with 2 per CPU, 0.8–1.2
// (docs/performance.md). SQLite has one writer, so one combiner.
func postgresCombiners() int { return 2 * runtime.GOMAXPROCS(0) }

func (s *Service) combinerFor(skuID int) *combine.Combiner[*call] {
	return s.combiners[uint(skuID)%uint(len(s.combiners))]
}

// runBatch sets the outcome of every call of batch. A batch of one runs
// exactly like a deduction without batching, under its own context.
func (s *Service) runBatch(batch []*call) {
	if s.onBatch != nil {
		s.onBatch(len(batch))
	}
	if len(batch) == 1 {
		c := batch[0]
		c.res, c.rec, c.err = s.attempt(c.ctx, c.appKey, c.in)
		return
	}
	ctx, cancel := batchContext(batch)
	defer cancel()
	if s.postgres {
		s.batchPostgres(ctx, batch)
		return
	}
	s.batchSQLite(ctx, batch)
}

// batchFailed sets the outcome of a batch whose transaction failed (and
// rolled back): a dependency failure is every call's answer (nothing of
// the batch was kept; each biz_no retried later runs anew); any other
// error makes each call run again on its own.
func (s *Service) batchFailed(ctx context.Context, batch []*call, err error) {
	if dependencyFailure(ctx, err) {
		err = s.dependencyError(err)
	} else {
		err = fmt.Errorf("%w: %w", errRunAlone, err)
	}
	for _, c := range batch {
		c.err = err
	}
}

// batchPostgres runs batch as one call of gatehouse_deduct_batch: one
// statement, one transaction. The deductions go in SKU order (then
// arrival order), so that concurrent batches lock SKU rows in one order;
// the function takes the records' locks in biz_no order.
func (s *Service) batchPostgres(ctx context.Context, batch []*call) {
	sorted := slices.Clone(batch)
	slices.SortStableFunc(sorted, func(a, b *call) int { return cmp.Compare(a.in.SkuID, b.in.SkuID) })
	n := len(sorted)
	var (
		bizNos, appKeys, paths, params, prefixes = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		skuIDs, quantities                       = make([]int64, n), make([]int64, n)
	)
	for i, c := range sorted {
		prefix, err := c.in.resultPrefix()
		if err != nil {
			s.batchFailed(ctx, batch, err)
			return
		}
		bizNos[i], appKeys[i], paths[i], params[i], prefixes[i] = c.in.BizNo, c.appKey, c.in.apiPath(), c.in.snapshot(), prefix
		skuIDs[i], quantities[i] = int64(c.in.SkuID), c.in.Quantity
	}
	notAfter, ok := ctx.Deadline() // the calls' work contexts all have one
	if !ok {
		notAfter = time.Now().Add(s.workTimeout) // as attemptPostgres does
	}
	rows, err := s.db.SQL.QueryContext(ctx, s.q.deductBatch, bizNos, appKeys, paths, params, skuIDs, quantities, prefixes, s.now(), notAfter)
	if err != nil {
		s.batchFailed(ctx, batch, fmt.Errorf("deduct: %w", err))
		return
	}
	type outcome struct {
		set bool
		res Result
		rec *record
		err error
	}
	outs := make([]outcome, n)
	for rows.Next() {
		var (
			ord       int
			fresh     bool
			rec       record
			appK      sql.NullString
			prms      sql.NullString
			status    sql.NullInt64
			remaining sql.NullInt64
			skuExists sql.NullBool
		)
		if err := rows.Scan(&ord, &fresh, &appK, &prms, &rec.result, &status, &remaining, &skuExists); err != nil {
			_ = rows.Close()
			s.batchFailed(ctx, batch, fmt.Errorf("deduct: %w", err))
			return
		}
		if ord < 1 || ord > n {
			_ = rows.Close()
			s.batchFailed(ctx, batch, fmt.Errorf("deduct: batch answered element %d of %d", ord, n))
			return
		}
		o := &outs[ord-1]
		o.set = true
		c := sorted[ord-1]
		switch {
		case !fresh:
			rec.appKey, rec.params, rec.status = appK.String, prms.String, int(status.Int64)
			o.rec = &rec
		case status.Int64 == StatusSucceeded && remaining.Valid:
			o.res = Result{Deduction: c.in.deduction(remaining.Int64)}
		case skuExists.Valid && !skuExists.Bool:
			o.err = errUnknownSKU
		default:
			o.err = ErrInsufficientStock
		}
	}
	// The transaction commits after the rows were sent: its error (a
	// failed commit, the deadline check) comes with the end of the rows.
	err = rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.batchFailed(ctx, batch, fmt.Errorf("deduct: %w", err))
		return
	}
	for i, c := range sorted {
		o := outs[i]
		if !o.set {
			// The biz_no's record was there and disappeared before it
			// could be read (its writer rolled back): start over.
			o.err = errVanished
		}
		c.res, c.rec, c.err = o.res, o.rec, o.err
	}
}

// batchSQLite runs batch as one transaction while holding the write turn:
// each deduction's statements in arrival order, one commit.
func (s *Service) batchSQLite(ctx context.Context, batch []*call) {
	release, err := s.db.WriteTurn(ctx)
	if err != nil {
		s.batchFailed(ctx, batch, err)
		return
	}
	defer release()
	st, err := s.sqliteStatements(ctx)
	if err != nil {
		s.batchFailed(ctx, batch, err)
		return
	}
	now := s.now()
	tx, err := s.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		s.batchFailed(ctx, batch, fmt.Errorf("deduct: begin: %w", err))
		return
	}
	type outcome struct {
		res     Result
		rec     *record
		outcome error
	}
	outs := make([]outcome, len(batch))
	for i, c := range batch {
		res, rec, out, err := s.stepSQLite(ctx, tx, st, c.appKey, c.in, now)
		if err != nil {
			_ = tx.Rollback()
			s.batchFailed(ctx, batch, err)
			return
		}
		outs[i] = outcome{res, rec, out}
	}
	if err := commit(tx); err != nil {
		s.batchFailed(ctx, batch, err)
		return
	}
	for i, c := range batch {
		c.res, c.rec, c.err = outs[i].res, outs[i].rec, outs[i].outcome
	}
}
