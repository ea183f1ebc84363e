package webhook

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"gatehouse/internal/telemetry"
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

// The scheduler's SQL. Waiting: status PENDING or RETRYING. Due: waiting,
// next attempt in the past, no live lease. In flight: a live lease.
// Receiving: the app is enabled and not past the end of its expire date,
// and the delivery's endpoint is enabled (a disabled or expired app's
// deliveries, and a disabled endpoint's, are held, not attempted and not
// lost).
const (
	dueCond = `d.next_attempt_at <= $1 AND (d.lease_until IS NULL OR d.lease_until < $1)`
	// Only waiting deliveries hold leases: every move to a final status,
	// a release and a cancel clear it.
	inFlightCond = `l.lease_until IS NOT NULL AND l.lease_until >= $1`
	// busyOf counts an app's attempts in flight, up to the cap $3 (all a
	// claim needs). The ordered LIMIT makes it an index scan, which marks
	// the entries of finished leases dead as it passes them (a bitmap
	// scan would visit each again on every claim until vacuum).
	busyOf = `(SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries l WHERE l.app_id = a.id AND ` + inFlightCond +
		` ORDER BY l.lease_until LIMIT $3) AS f)`
	// busyOfEndpoint is busyOf for endpoint e.
	busyOfEndpoint = `(SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries l WHERE l.endpoint_id = e.id AND ` + inFlightCond +
		` ORDER BY l.lease_until LIMIT $3) AS f)`
	// shareOf is endpoint e's share of its app's in-flight cap $3: the cap
	// divided among the app's enabled endpoints, rounded up, at least 1.
	// One hanging endpoint thus never takes the slots of the others.
	shareOf   = `(SELECT ($3 + count(*) - 1) / count(*) FROM webhook_endpoints s WHERE s.app_id = e.app_id AND s.enabled)`
	receiving = `a.status = 1 AND (a.expire_date IS NULL OR a.expire_date > $2)`

	// jobColumns are the columns of a job, in scanJobs's order.
	jobColumns = `id, app_id, COALESCE(endpoint_id, 0), event_id, event_type, biz_data, callback_url, retry_count, max_retry, attempt_count, create_time, COALESCE(traceparent, ''), COALESCE(tracestate, '')`
)

// waitingOf selects (id, next_attempt_at) of the first limit deliveries of
// endpoint ep (an SQL expression) that are waiting and meet cond, one
// query per waiting status: each walks the index (endpoint_id, status,
// next_attempt_at) in order and stops at limit, so no backlog is ever
// sorted or scanned. (Postgres rewrites a partial index's status IN (…)
// predicate into a form the migration diff never takes for equal, hence
// the two branches.)
func waitingOf(ep, cond, limit string) string {
	one := func(status, alias string) string {
		return `SELECT * FROM (SELECT d.id, d.next_attempt_at FROM webhook_deliveries d WHERE d.endpoint_id = ` + ep +
			` AND d.status = '` + status + `' AND ` + cond + ` ORDER BY d.next_attempt_at LIMIT ` + limit + `) AS ` + alias
	}
	return one("PENDING", "wp") + ` UNION ALL ` + one("RETRYING", "wr")
}

// oldestOf is the earliest next_attempt_at among the deliveries of app
// a's enabled endpoints that meet cond (one index probe per endpoint).
func oldestOf(cond string) string {
	return `(SELECT min((SELECT min(w.next_attempt_at) FROM (` + waitingOf("e.id", cond, "1") + `) AS w))
    FROM webhook_endpoints e WHERE e.app_id = a.id AND e.enabled)`
}

var (
	// appsSQL picks the apps to serve this round: those with due work and
	// fewer than $3 (the per-app cap) attempts in flight over all
	// replicas, least busy first, then the one whose work waited longest;
	// at most $4 of them. On Postgres their rows are locked (FOR NO KEY
	// UPDATE, which does not block the inserts of new deliveries) and
	// SKIP LOCKED, so each app is claimed by one replica at a time and the
	// cap holds across replicas; another replica serves other apps.
	appsSQL = `SELECT c.id, c.busy FROM (
  SELECT a.id,
    ` + busyOf + ` AS busy,
    ` + oldestOf(dueCond) + ` AS oldest
  FROM partner_apps a WHERE ` + receiving + `
) c WHERE c.oldest IS NOT NULL AND c.busy < $3 ORDER BY c.busy, c.oldest, c.id LIMIT $4`

	// lockAppsPostgres locks the apps appsSQL picks (FOR NO KEY UPDATE
	// SKIP LOCKED) and names them in the transaction-local setting
	// gatehouse.claim_apps.
	lockAppsPostgres = `SELECT set_config('gatehouse.claim_apps', COALESCE(string_agg(l.id::text, ','), ''), true) FROM (
  SELECT a.id FROM partner_apps a JOIN (` + appsSQL + `) c ON c.id = a.id FOR NO KEY UPDATE OF a SKIP LOCKED) l`

	// claimPostgres leases, in one statement, up to $4 due deliveries of
	// the apps lockAppsPostgres locked in the same transaction (so the
	// in-flight counts are exact): at most $3 in flight per app, and per
	// enabled endpoint at most its share of them (shareOf), taken in
	// rounds — every endpoint's oldest, then every endpoint's second
	// oldest within an app; then every app's first pick, every app's
	// second — so no app and no endpoint takes the batch alone.
	//
	// The chosen ids are gathered first (ARRAY(…), computed once) and the
	// rows leased through the primary key (id = ANY); the re-check of the
	// status is written so that no index can serve it (… IS TRUE). The
	// generic plan is made once per connection, perhaps while the outbox
	// was empty or nearly all final; written as a join, or with a status
	// test an index could serve, it read every waiting row on every claim
	// once a burst arrived (TestClaimPlanAfterQuietStatistics).
	claimPostgres = `UPDATE webhook_deliveries w SET lease_until = $2 WHERE w.id = ANY(ARRAY(
  SELECT p.id FROM unnest(string_to_array(NULLIF(current_setting('gatehouse.claim_apps', true), ''), ',')::bigint[]) AS a(id)
  CROSS JOIN LATERAL (
    SELECT q.id, q.next_attempt_at, row_number() OVER (ORDER BY q.rn_e, q.next_attempt_at, q.id) AS rn FROM (
      SELECT x.id, x.next_attempt_at, x.rn_e FROM (
        SELECT e.id AS eid, ` + shareOf + ` - ` + busyOfEndpoint + ` AS room FROM webhook_endpoints e WHERE e.app_id = a.id AND e.enabled
      ) ee CROSS JOIN LATERAL (
        SELECT y.id, y.next_attempt_at, row_number() OVER (ORDER BY y.next_attempt_at, y.id) AS rn_e FROM (` + waitingOf("ee.eid", dueCond, "$3") + `) AS y
      ) x WHERE x.rn_e <= ee.room
    ) q
  ) p
  WHERE p.rn <= $3 - ` + busyOf + `
  ORDER BY p.rn, p.next_attempt_at, p.id LIMIT $4
))
AND (w.status IN ('PENDING', 'RETRYING')) IS TRUE AND (w.lease_until IS NULL OR w.lease_until < $1)
RETURNING w.id, w.app_id, COALESCE(w.endpoint_id, 0), w.event_id, w.event_type, w.biz_data, w.callback_url, w.retry_count, w.max_retry, w.attempt_count, w.create_time, COALESCE(w.traceparent, ''), COALESCE(w.tracestate, '')`

	// endpointsSQLite lists app $2's enabled endpoints with their room
	// (share minus attempts in flight); endpointDueSQLite one endpoint's
	// due deliveries, oldest first (SQLite has no LATERAL: the rounds are
	// made in Go).
	endpointsSQLite   = `SELECT e.id, ` + shareOf + ` - ` + busyOfEndpoint + ` FROM webhook_endpoints e WHERE e.app_id = $2 AND e.enabled ORDER BY e.id`
	endpointDueSQLite = `SELECT x.id FROM (` + waitingOf("$2", dueCond, "$3") + `) AS x ORDER BY x.next_attempt_at, x.id LIMIT $3`

	// nextDueSQL is the earliest due time after $1 (the clock of the last
	// claim) of a delivery this process could claim then (of an enabled
	// endpoint of an app that may receive). Rows due at $1 but not
	// claimed are blocked (their app or endpoint is at its cap, or
	// another replica is claiming it): a finishing attempt wakes the loop
	// for those.
	nextDueSQL = `SELECT min(n) FROM (SELECT ` +
		oldestOf(`d.next_attempt_at > $1 AND (d.lease_until IS NULL OR d.lease_until < $1)`) + ` AS n
FROM partner_apps a WHERE ` + receiving + `) x`
)

// claim leases up to n deliveries due at now to this process, at most PerApp in
// flight per app and fair across apps (see appsSQL). The lease value of
// the claim is the fencing token of the attempts.
//
// It is one transaction of two statements: lock the apps to serve, then
// lease their deliveries (the second sees the in-flight counts as they are
// once the apps are locked). On Postgres both go to the server in one
// round trip (a pgx batch: one implicit transaction). On SQLite the
// transaction holds the database's write lock from its start (the store
// opens it IMMEDIATE), so nothing changes under it.
func (d *dispatcher) claim(ctx context.Context, now time.Time, n int) ([]job, error) {
	s := d.s
	lease := dbTime(now.Add(s.opt.Lease))
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

// claimPostgres sends lockAppsPostgres and claimPostgres as one pgx batch:
// one round trip, one implicit transaction. The first statement names the
// apps it locked in a transaction-local setting the second reads.
func (s *Service) claimPostgres(ctx context.Context, now, dayAgo, lease time.Time, n int) ([]job, error) {
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
		b.Queue(`SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`)
		b.Queue(lockAppsPostgres, now, dayAgo, s.opt.PerApp, n)
		b.Queue(`SELECT set_config('enable_seqscan', 'off', true)`)
		b.Queue(claimPostgres, now, lease, s.opt.PerApp, n)
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

// claimSQLite makes claimPostgres's rounds in Go: each app's due rows
// within its quota, interleaved oldest first, then one UPDATE … RETURNING.
func (s *Service) claimSQLite(ctx context.Context, now, dayAgo, lease time.Time, n int) ([]job, error) {
	var out []job
	err := s.sql.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.claimSQLiteTx(ctx, tx, now, dayAgo, lease, n)
		return err
	})
	return out, err
}

func (s *Service) claimSQLiteTx(ctx context.Context, tx *sql.Tx, now, dayAgo, lease time.Time, n int) ([]job, error) {
	type app struct{ id, busy int }
	var apps []app
	rows, err := s.sql.query(ctx, tx, appsSQL, now, dayAgo, s.opt.PerApp, n)
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
		res, err := s.sql.exec(ctx, tx, leaseSQLite, now, lease, id)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		jobs, err := scanJobs(s.sql.query(ctx, tx, jobSQLite, id))
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
func (s *Service) appDueSQLite(ctx context.Context, tx *sql.Tx, now time.Time, appID, room int) ([]int64, error) {
	type ep struct{ id, room int }
	var eps []ep
	rows, err := s.sql.query(ctx, tx, endpointsSQLite, now, appID, s.opt.PerApp)
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
		rows, err := s.sql.query(ctx, tx, endpointDueSQLite, now, e.id, min(e.room, room))
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

// leaseSQLite and jobSQLite lease one delivery and read it (claimSQLite).
const (
	leaseSQLite = `UPDATE webhook_deliveries SET lease_until = $2 WHERE id = $3 AND status IN ('PENDING', 'RETRYING') AND (lease_until IS NULL OR lease_until < $1)`
	jobSQLite   = `SELECT ` + jobColumns + ` FROM webhook_deliveries WHERE id = $1`
)

// renumber turns the "?" placeholders of s into $from, $from+1, …
func renumber(s string, from int) string {
	var b strings.Builder
	for _, r := range s {
		if r == '?' {
			fmt.Fprintf(&b, "$%d", from)
			from++
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
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
