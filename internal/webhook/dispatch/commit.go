package dispatch

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/internal/webhook/dispatch/adapter"
)

// maxOutcomeBatch bounds how many outcomes one write stores.
const maxOutcomeBatch = 32

// outcomeWriter stores the outcomes of attempts (see record). Outcomes
// that arrive while one write is running go together in the next one
// (group commit): on Postgres one statement inserts every attempt row and
// moves every delivery, on SQLite one transaction does. A worker waits for
// its outcome's write, so nothing changes for it but the cost: under load
// a delivery costs a fraction of a statement, with no added wait when idle.
type outcomeWriter struct {
	s    *Dispatcher
	in   chan *outcomeReq
	done sync.WaitGroup
}

type outcomeReq struct {
	p   adapter.OutcomeParams // numbered
	res chan outcomeRes
}

type outcomeRes struct {
	owned bool
	next  *job // the delivery handed off to the worker (see work), if any
	err   error
}

// newOutcomeWriter starts the writer: one write at a time on either
// backend (SQLite has one writer anyway). On Postgres a second concurrent
// writer made the batches smaller and cost more CPU per outcome than it
// saved in waiting: with the running token released before the write
// (see the dispatcher's work), the fan-out drained at 0.84–0.89 of its
// floor with one writer against 0.80–0.83 with two (docs/performance.md).
func newOutcomeWriter(s *Dispatcher) *outcomeWriter {
	w := &outcomeWriter{s: s, in: make(chan *outcomeReq, maxOutcomeBatch)}
	w.done.Go(w.run)
	return w
}

// store writes one outcome and reports whether its delivery moved and,
// if p asked for one, the delivery handed off to the worker.
func (w *outcomeWriter) store(p adapter.OutcomeParams) outcomeRes {
	r := &outcomeReq{p: p, res: make(chan outcomeRes, 1)}
	w.in <- r
	return <-r.res
}

// close stops the writer once every outcome sent was written.
func (w *outcomeWriter) close() {
	close(w.in)
	w.done.Wait()
}

func (w *outcomeWriter) run() {
	for r := range w.in {
		batch := []*outcomeReq{r}
	more:
		for len(batch) < maxOutcomeBatch {
			select {
			case r, ok := <-w.in:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		w.write(batch)
	}
}

// write stores a batch; a failure (a number taken by a worker that took a
// delivery over, or the database) fails every outcome of it, and each
// worker then stores its own the careful way (see record).
func (w *outcomeWriter) write(batch []*outcomeReq) {
	ctx, cancel := storeCtx()
	defer cancel()
	if len(batch) == 1 && !batch[0].p.Handoff {
		owned, err := w.s.recordAs(ctx, batch[0].p)
		batch[0].res <- outcomeRes{owned: owned, err: err}
		return
	}
	owned, handed, err := w.s.recordBatch(ctx, batch)
	for _, r := range batch {
		res := outcomeRes{owned: owned[r.p.DeliveryID], err: err}
		if j, ok := handed[r.p.DeliveryID]; ok {
			res.next = &j
		}
		r.res <- res
	}
}

// recordBatch stores several outcomes at once and returns the deliveries
// that moved and, by the id of the delivery whose outcome asked for one,
// the deliveries handed off (SQLite only: see adapter.HandoffSQLite).
func (s *Dispatcher) recordBatch(ctx context.Context, batch []*outcomeReq) (map[int]bool, map[int]job, error) {
	owned := make(map[int]bool, len(batch))
	if s.db.Dialect == dialect.Postgres {
		ps := make([]adapter.OutcomeParams, len(batch))
		for i, r := range batch {
			ps[i] = r.p
		}
		// One statement: atomic without a transaction around it.
		rows, err := s.db.SQL.QueryContext(ctx, adapter.RecordManyPostgres, adapter.ManyParams(ps...).Args()...)
		if err != nil {
			return owned, nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				return owned, nil, err
			}
			owned[id] = true
		}
		return owned, nil, rows.Err()
	}
	handed := map[int]job{}
	now := s.now()
	dayAgo := now.Add(-24 * time.Hour)
	lease := adapter.DBTime(now.Add(s.opt.Lease))
	err := s.sql.InTx(ctx, func(tx *sql.Tx) error {
		for _, r := range batch {
			if _, err := s.sql.Exec(ctx, tx, adapter.InsertAttempt, r.p.AttemptArgs()...); err != nil {
				return err
			}
			res, err := s.sql.Exec(ctx, tx, adapter.MoveDelivery, r.p.MoveArgs()...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				owned[r.p.DeliveryID] = true
			}
			if !owned[r.p.DeliveryID] || !r.p.Handoff {
				continue
			}
			jobs, err := scanJobs(s.sql.Query(ctx, tx, adapter.HandoffSQLite, adapter.HandoffParams{Now: now, DayAgo: dayAgo, PerApp: s.opt.PerApp, Lease: lease, EndpointID: r.p.EndpointID}.Args()...))
			if err != nil {
				return err
			}
			for _, j := range jobs {
				j.Lease = lease
				handed[r.p.DeliveryID] = j
			}
		}
		return nil
	})
	if err != nil {
		// Rolled back: nothing moved, nothing was handed off; each worker
		// stores its own outcome again (see record), with no hand-off.
		return map[int]bool{}, nil, err
	}
	return owned, handed, nil
}
