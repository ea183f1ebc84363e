package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"gatehouse/internal/telemetry"
	"gatehouse/internal/webhook/dispatch/adapter"
)

// job is a delivery leased to this process for one attempt: the columns
// an attempt needs, as they were when it was claimed.
type job struct {
	ID           int
	AppID        int
	EndpointID   int
	EventID      string
	EventType    string
	BizData      string
	CallbackURL  string
	RetryCount   int
	MaxRetry     int
	AttemptCount int
	CreateTime   time.Time
	Lease        time.Time
	// Trace is the W3C trace context of the transaction that queued the
	// event (zero when it was not traced).
	Trace telemetry.Context
}

// claim leases up to n deliveries due at now to this process, at most PerApp in
// flight per app and fair across apps (see adapter.AppsSQL). The lease value of
// the claim is the fencing token of the attempts.
//
// It is one transaction of two adapter.Statements: lock the apps to serve, then
// lease their deliveries (the second sees the in-flight counts as they are
// once the apps are locked). On Postgres both go to the server in one
// round trip (a pgx batch: one implicit transaction). On SQLite the
// transaction holds the database's write lock from its start (the store
// opens it IMMEDIATE), so nothing changes under it.
func (d *dispatcher) claim(ctx context.Context, now time.Time, n int) ([]job, error) {
	s := d.s
	lease := adapter.DBTime(now.Add(s.opt.Lease))
	dayAgo := now.Add(-24 * time.Hour) // an expire date is valid through its whole UTC day
	var (
		jobs []job
		err  error
	)
	if s.db.Dialect == dialect.Postgres {
		jobs, err = s.claimPostgres(ctx, now, dayAgo, lease, n)
	} else {
		jobs, err = s.claimSQLite(ctx, now, dayAgo, lease, n)
	}
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	for i := range jobs {
		jobs[i].Lease = lease
	}
	return jobs, nil
}

// adapter.ClaimPostgres sends adapter.LockAppsPostgres and adapter.ClaimPostgres as one pgx batch:
// one round trip, one implicit transaction. The first statement names the
// apps it locked in a transaction-local setting the second reads.
func (s *Dispatcher) claimPostgres(ctx context.Context, now, dayAgo, lease time.Time, n int) ([]job, error) {
	conn, err := s.db.SQL.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var jobs []job
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		b := &pgx.Batch{}
		// The plans do not depend on the values: planning them again on
		// every claim (a custom plan) costs more than running them. The
		// generic plan is made once per connection, possibly on an empty,
		// never analyzed outbox, whose size Postgres guesses from the row
		// width: a wide row makes a sequential scan look cheapest, and that
		// plan would then walk the whole backlog on every claim. The claim
		// reads a few rows per app by index, so scans are ruled out for it (not
		// for the apps' statement, which reads them all).
		b.Queue(adapter.GenericPlansPostgres)
		b.Queue(adapter.LockAppsPostgres, adapter.AppsParams{Now: now, DayAgo: dayAgo, PerApp: s.opt.PerApp, Limit: n}.Args()...)
		b.Queue(adapter.NoSeqScanPostgres)
		b.Queue(adapter.ClaimPostgres, adapter.ClaimParams{Now: now, Lease: lease, PerApp: s.opt.PerApp, Limit: n}.Args()...)
		br := pc.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return fmt.Errorf("apps: %w", err)
		}
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return err
		}
		for rows.Next() {
			var j job
			if err := rows.Scan(&j.ID, &j.AppID, &j.EndpointID, &j.EventID, &j.EventType, &j.BizData, &j.CallbackURL,
				&j.RetryCount, &j.MaxRetry, &j.AttemptCount, &j.CreateTime, &j.Trace.Traceparent, &j.Trace.Tracestate); err != nil {
				rows.Close()
				_ = br.Close()
				return err
			}
			jobs = append(jobs, j)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			_ = br.Close()
			return err
		}
		return br.Close()
	})
	return jobs, err
}

// claimSQLite makes adapter.ClaimPostgres's rounds in Go: each app's due rows
// within its quota, interleaved oldest first, then one UPDATE … RETURNING.
func (s *Dispatcher) claimSQLite(ctx context.Context, now, dayAgo, lease time.Time, n int) ([]job, error) {
	var out []job
	err := s.sql.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.claimSQLiteTx(ctx, tx, now, dayAgo, lease, n)
		return err
	})
	return out, err
}

func (s *Dispatcher) claimSQLiteTx(ctx context.Context, tx *sql.Tx, now, dayAgo, lease time.Time, n int) ([]job, error) {
	type app struct{ id, busy int }
	var apps []app
	rows, err := s.sql.Query(ctx, tx, adapter.AppsSQLite, adapter.AppsParams{Now: now, DayAgo: dayAgo, PerApp: s.opt.PerApp, Limit: n}.Args()...)
	if err != nil {
		return nil, fmt.Errorf("apps: %w", err)
	}
	for rows.Next() {
		var a app
		if err := rows.Scan(&a.id, &a.busy); err != nil {
			rows.Close()
			return nil, fmt.Errorf("apps: %w", err)
		}
		apps = append(apps, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("apps: %w", err)
	}
	var queues [][]int64
	for _, a := range apps {
		q, err := s.appDueSQLite(ctx, tx, now, a.id, s.opt.PerApp-a.busy)
		if err != nil {
			return nil, err
		}
		queues = append(queues, q)
	}
	ids := roundRobin(queues, n)
	if len(ids) == 0 {
		return nil, nil
	}
	// One short prepared statement per row: SQLite runs them in-process,
	// cheaper than parsing an UPDATE with a list of ids each time.
	var out []job
	for _, id := range ids {
		res, err := s.sql.Exec(ctx, tx, adapter.LeaseSQLite, adapter.LeaseParams{Now: now, Lease: lease, DeliveryID: id}.Args()...)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		jobs, err := scanJobs(s.sql.Query(ctx, tx, adapter.JobSQLite, adapter.DeliveryParams{DeliveryID: int(id)}.Args()...))
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
	}
	return out, nil
}

// appDueSQLite lists up to room due deliveries of app appID: every
// enabled endpoint's within its room, in rounds (each endpoint's oldest,
// then each one's second oldest, …).
func (s *Dispatcher) appDueSQLite(ctx context.Context, tx *sql.Tx, now time.Time, appID, room int) ([]int64, error) {
	type ep struct{ id, room int }
	var eps []ep
	rows, err := s.sql.Query(ctx, tx, adapter.EndpointsSQLite, adapter.EndpointsParams{Now: now, AppID: appID, PerApp: s.opt.PerApp}.Args()...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var e ep
		if err := rows.Scan(&e.id, &e.room); err != nil {
			rows.Close()
			return nil, err
		}
		eps = append(eps, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var queues [][]int64
	for _, e := range eps {
		if e.room <= 0 {
			continue
		}
		rows, err := s.sql.Query(ctx, tx, adapter.EndpointDueSQLite, adapter.EndpointDueParams{Now: now, EndpointID: e.id, Limit: min(e.room, room)}.Args()...)
		if err != nil {
			return nil, err
		}
		var q []int64
		for rows.Next() {
			var did int64
			if err := rows.Scan(&did); err != nil {
				rows.Close()
				return nil, err
			}
			q = append(q, did)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		queues = append(queues, q)
	}
	return roundRobin(queues, room), nil
}

// roundRobin takes up to n ids from queues: every queue's first, then
// every queue's second, and so on.
func roundRobin(queues [][]int64, n int) []int64 {
	var ids []int64
	for round := 0; len(ids) < n; round++ {
		took := false
		for _, q := range queues {
			if round < len(q) && len(ids) < n {
				ids = append(ids, q[round])
				took = true
			}
		}
		if !took {
			break
		}
	}
	return ids
}

func scanJobs(rows *sql.Rows, err error) ([]job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.ID, &j.AppID, &j.EndpointID, &j.EventID, &j.EventType, &j.BizData, &j.CallbackURL,
			&j.RetryCount, &j.MaxRetry, &j.AttemptCount, &j.CreateTime, &j.Trace.Traceparent, &j.Trace.Tracestate); err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}
