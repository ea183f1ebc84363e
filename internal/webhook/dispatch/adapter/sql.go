// Package adapter is the dispatcher's storage layer: its raw SQL, in one
// place — the scheduler's claim and its wake-up times, the storing of
// attempts' outcomes, the breaker's and the rate limit's postponements,
// the backlog metric, retention, recordNumbered's lock and the claim's
// settings — and the prepared-statement cache that runs it. Everything
// else goes through Ent. Tables and columns are named from Ent's
// generated constants. Each statement is run on both backends (those
// written for one backend on it) by TestEveryStatementRuns. Every
// statement with parameters takes them from a named struct next to it
// (OutcomeParams and RecordManyParams, for the outcome statements, are in
// statements.go), whose Args method lists them in placeholder order; only
// the claim's settings have none.
package adapter

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent/deliveryattempt"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookendpoint"
)

// The tables the statements name; they and every column come from Ent's
// generated constants, so a renamed field fails to compile here.
const (
	deliveries = webhookdelivery.Table
	attempts   = deliveryattempt.Table
	apps       = partnerapp.Table
	endpoints  = webhookendpoint.Table
)

// sqliteLimits writes each bound LIMIT of q as +$n, for SQLite. SQLite
// (3.47 and later) reads the value bound to a LIMIT's parameter while it
// plans, and then marks the statement to be prepared again whenever that
// parameter is bound, which database/sql does on every execution: every
// run of such a statement parsed and planned it anew (under the write
// lock, in the claim and the hand-off: 38 % of the process's CPU while a
// fan-out drained). +$n is the same number, whose value the planner does
// not read. Postgres is not given it (it cannot type a unary + of an
// untyped parameter) and does not need it.
func sqliteLimits(q string) string { return boundLimit.ReplaceAllString(q, "LIMIT +$$$1") }

var boundLimit = regexp.MustCompile(`LIMIT \$(\d+)`)

// The scheduler's SQL. Waiting: status PENDING or RETRYING. Due: waiting,
// next attempt in the past, no live lease. In flight: a live lease.
// Receiving: the app is enabled and not past the end of its expire date,
// and the delivery's endpoint is enabled (a disabled or expired app's
// deliveries, and a disabled endpoint's, are held, not attempted and not
// lost).
const (
	dueCond = `d.` + webhookdelivery.FieldNextAttemptAt + ` <= $1 AND (d.` + webhookdelivery.FieldLeaseUntil + ` IS NULL OR d.` + webhookdelivery.FieldLeaseUntil + ` < $1)`
	// Only waiting deliveries hold leases: every move to a final status,
	// a release and a cancel clear it.
	inFlightCond = `l.` + webhookdelivery.FieldLeaseUntil + ` IS NOT NULL AND l.` + webhookdelivery.FieldLeaseUntil + ` >= $1`
	// busyOf counts an app's attempts in flight, up to the cap $3 (all a
	// claim needs). The ordered LIMIT makes it an index scan, which marks
	// the entries of finished leases dead as it passes them (a bitmap
	// scan would visit each again on every claim until vacuum).
	busyOf = `(SELECT count(*) FROM (SELECT 1 FROM ` + deliveries + ` l WHERE l.` + webhookdelivery.FieldAppID + ` = a.` + partnerapp.FieldID + ` AND ` + inFlightCond +
		` ORDER BY l.` + webhookdelivery.FieldLeaseUntil + ` LIMIT $3) AS f)`
	// busyOfEndpoint is busyOf for endpoint e.
	busyOfEndpoint = `(SELECT count(*) FROM (SELECT 1 FROM ` + deliveries + ` l WHERE l.` + webhookdelivery.FieldEndpointID + ` = e.` + webhookendpoint.FieldID + ` AND ` + inFlightCond +
		` ORDER BY l.` + webhookdelivery.FieldLeaseUntil + ` LIMIT $3) AS f)`
	// shareOf is endpoint e's share of its app's in-flight cap $3: the cap
	// divided among the app's enabled endpoints, rounded up, at least 1.
	// One hanging endpoint thus never takes the slots of the others.
	shareOf   = `(SELECT ($3 + count(*) - 1) / count(*) FROM ` + endpoints + ` s WHERE s.` + webhookendpoint.FieldAppID + ` = e.` + webhookendpoint.FieldAppID + ` AND s.` + webhookendpoint.FieldEnabled + `)`
	receiving = `a.` + partnerapp.FieldStatus + ` = 1 AND (a.` + partnerapp.FieldExpireDate + ` IS NULL OR a.` + partnerapp.FieldExpireDate + ` > $2)`

	// JobColumns are the columns of a job, in scanJobs's order.
	JobColumns = webhookdelivery.FieldID + `, ` + webhookdelivery.FieldAppID + `, COALESCE(` + webhookdelivery.FieldEndpointID + `, 0), ` + webhookdelivery.FieldEventID + `, ` + webhookdelivery.FieldEventType + `, ` + webhookdelivery.FieldBizData + `, ` + webhookdelivery.FieldCallbackURL + `, ` + webhookdelivery.FieldRetryCount + `, ` + webhookdelivery.FieldMaxRetry + `, ` + webhookdelivery.FieldAttemptCount + `, ` + webhookdelivery.FieldCreateTime + `, COALESCE(` + webhookdelivery.FieldTraceparent + `, ''), COALESCE(` + webhookdelivery.FieldTracestate + `, '')`
)

// appsOf is AppsSQL; fence ends its inner query. On Postgres it is
// " OFFSET 0", which keeps the planner from pulling the inner query up:
// pulled up, every app's busy count and oldest due time (an index probe
// per endpoint) were computed twice, once for the filter and once for
// the order.
func appsOf(fence string) string {
	return `SELECT c.id, c.busy FROM (
  SELECT a.` + partnerapp.FieldID + `,
    ` + busyOf + ` AS busy,
    ` + oldestOf(dueCond) + ` AS oldest
  FROM ` + apps + ` a WHERE ` + receiving + fence + `
) c WHERE c.oldest IS NOT NULL AND c.busy < $3 ORDER BY c.busy, c.oldest, c.id LIMIT $4`
}

// waitingOf selects (id, next_attempt_at) of the first limit deliveries of
// endpoint ep (an SQL expression) that are waiting and meet cond, one
// query per waiting status: each walks the index (endpoint_id, status,
// next_attempt_at) in order and stops at limit, so no backlog is ever
// sorted or scanned. (Postgres rewrites a partial index's status IN (…)
// predicate into a form the migration diff never takes for equal, hence
// the two branches.)
func waitingOf(ep, cond, limit string) string {
	one := func(status, alias string) string {
		return `SELECT * FROM (SELECT d.` + webhookdelivery.FieldID + `, d.` + webhookdelivery.FieldNextAttemptAt + ` FROM ` + deliveries + ` d WHERE d.` + webhookdelivery.FieldEndpointID + ` = ` + ep +
			` AND d.` + webhookdelivery.FieldStatus + ` = '` + status + `' AND ` + cond + ` ORDER BY d.` + webhookdelivery.FieldNextAttemptAt + ` LIMIT ` + limit + `) AS ` + alias
	}
	return one("PENDING", "wp") + ` UNION ALL ` + one("RETRYING", "wr")
}

// oldestOf is the earliest next_attempt_at among the deliveries of app
// a's enabled endpoints that meet cond (one index probe per endpoint).
func oldestOf(cond string) string {
	return `(SELECT min((SELECT min(w.` + webhookdelivery.FieldNextAttemptAt + `) FROM (` + waitingOf("e.id", cond, "1") + `) AS w))
    FROM ` + endpoints + ` e WHERE e.` + webhookendpoint.FieldAppID + ` = a.` + partnerapp.FieldID + ` AND e.` + webhookendpoint.FieldEnabled + `)`
}

var (
	// AppsSQL picks the apps to serve this round: those with due work and
	// fewer than $3 (the per-app cap) attempts in flight over all
	// replicas, least busy first, then the one whose work waited longest;
	// at most $4 of them. On Postgres their rows are locked (FOR NO KEY
	// UPDATE, which does not block the inserts of new deliveries) and
	// SKIP LOCKED, so each app is claimed by one replica at a time and the
	// cap holds across replicas; another replica serves other apps.
	AppsSQL = appsOf("")
	// AppsSQLite is AppsSQL as SQLite runs it (see sqliteLimits).
	AppsSQLite = sqliteLimits(AppsSQL)

	// LockAppsPostgres locks the apps AppsSQL picks (FOR NO KEY UPDATE
	// SKIP LOCKED) and names them in the transaction-local setting
	// gatehouse.claim_apps.
	LockAppsPostgres = `SELECT set_config('gatehouse.claim_apps', COALESCE(string_agg(l.` + webhookdelivery.FieldID + `::text, ','), ''), true) FROM (
  SELECT a.` + partnerapp.FieldID + ` FROM ` + apps + ` a JOIN (` + appsOf(" OFFSET 0") + `) c ON c.id = a.` + partnerapp.FieldID + ` FOR NO KEY UPDATE OF a SKIP LOCKED) l`
)

// AppsParams are the parameters of AppsSQL, AppsSQLite and
// LockAppsPostgres.
type AppsParams struct {
	Now    time.Time // $1: the claim's clock
	DayAgo time.Time // $2: Now less a day (an expire date is valid through its whole UTC day)
	PerApp int       // $3: the cap of attempts in flight per app
	Limit  int       // $4: the most apps to pick
}

func (p AppsParams) Args() []any { return []any{p.Now, p.DayAgo, p.PerApp, p.Limit} }

var (
	// ClaimPostgres leases, in one statement, up to $4 due deliveries of
	// the apps LockAppsPostgres locked in the same transaction (so the
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
	//
	// Each endpoint's room is computed once (its share as a window count
	// over the app's enabled endpoints, the list fenced with OFFSET 0 so
	// that the planner does not pull it into the row filter and evaluate
	// it per candidate row) and bounds its index scans: a claim for apps
	// of 5 endpoints took half the time it did.
	ClaimPostgres = `UPDATE ` + deliveries + ` w SET ` + webhookdelivery.FieldLeaseUntil + ` = $2 WHERE w.` + webhookdelivery.FieldID + ` = ANY(ARRAY(
  SELECT p.` + webhookdelivery.FieldID + ` FROM unnest(string_to_array(NULLIF(current_setting('gatehouse.claim_apps', true), ''), ',')::bigint[]) AS a(id)
  CROSS JOIN LATERAL (
    SELECT q.` + webhookdelivery.FieldID + `, q.` + webhookdelivery.FieldNextAttemptAt + `, row_number() OVER (ORDER BY q.rn_e, q.` + webhookdelivery.FieldNextAttemptAt + `, q.` + webhookdelivery.FieldID + `) AS rn FROM (
      SELECT x.` + webhookdelivery.FieldID + `, x.` + webhookdelivery.FieldNextAttemptAt + `, x.rn_e FROM (
        SELECT e.` + webhookendpoint.FieldID + ` AS eid, ($3 + count(*) OVER () - 1) / count(*) OVER () - ` + busyOfEndpoint + ` AS room
        FROM ` + endpoints + ` e WHERE e.` + webhookendpoint.FieldAppID + ` = a.` + partnerapp.FieldID + ` AND e.` + webhookendpoint.FieldEnabled + ` OFFSET 0
      ) ee CROSS JOIN LATERAL (
        SELECT y.` + webhookdelivery.FieldID + `, y.` + webhookdelivery.FieldNextAttemptAt + `, row_number() OVER (ORDER BY y.` + webhookdelivery.FieldNextAttemptAt + `, y.` + webhookdelivery.FieldID + `) AS rn_e FROM (` + waitingOf("ee.eid", dueCond, "GREATEST(ee.room, 0)") + `) AS y
      ) x WHERE x.rn_e <= ee.room
    ) q
  ) p
  WHERE p.rn <= $3 - ` + busyOf + `
  ORDER BY p.rn, p.` + webhookdelivery.FieldNextAttemptAt + `, p.` + webhookdelivery.FieldID + ` LIMIT $4
))
AND (w.` + webhookdelivery.FieldStatus + ` IN ('PENDING', 'RETRYING')) IS TRUE AND (w.` + webhookdelivery.FieldLeaseUntil + ` IS NULL OR w.` + webhookdelivery.FieldLeaseUntil + ` < $1)
RETURNING w.` + webhookdelivery.FieldID + `, w.` + webhookdelivery.FieldAppID + `, COALESCE(w.` + webhookdelivery.FieldEndpointID + `, 0), w.` + webhookdelivery.FieldEventID + `, w.` + webhookdelivery.FieldEventType + `, w.` + webhookdelivery.FieldBizData + `, w.` + webhookdelivery.FieldCallbackURL + `, w.` + webhookdelivery.FieldRetryCount + `, w.` + webhookdelivery.FieldMaxRetry + `, w.` + webhookdelivery.FieldAttemptCount + `, w.` + webhookdelivery.FieldCreateTime + `, COALESCE(w.` + webhookdelivery.FieldTraceparent + `, ''), COALESCE(w.` + webhookdelivery.FieldTracestate + `, '')`
)

// ClaimParams are ClaimPostgres's parameters.
type ClaimParams struct {
	Now    time.Time // $1: the claim's clock
	Lease  time.Time // $2: the lease_until given to the claimed deliveries
	PerApp int       // $3: the cap of attempts in flight per app
	Limit  int       // $4: the most deliveries to claim
}

func (p ClaimParams) Args() []any { return []any{p.Now, p.Lease, p.PerApp, p.Limit} }

var (
	// EndpointsSQLite lists app $2's enabled endpoints with their room
	// (share minus attempts in flight); EndpointDueSQLite one endpoint's
	// due deliveries, oldest first (SQLite has no LATERAL: the rounds are
	// made in Go).
	EndpointsSQLite   = sqliteLimits(`SELECT e.` + webhookendpoint.FieldID + `, ` + shareOf + ` - ` + busyOfEndpoint + ` FROM ` + endpoints + ` e WHERE e.` + webhookendpoint.FieldAppID + ` = $2 AND e.` + webhookendpoint.FieldEnabled + ` ORDER BY e.` + webhookendpoint.FieldID)
	EndpointDueSQLite = sqliteLimits(`SELECT x.` + webhookdelivery.FieldID + ` FROM (` + waitingOf("$2", dueCond, "$3") + `) AS x ORDER BY x.` + webhookdelivery.FieldNextAttemptAt + `, x.` + webhookdelivery.FieldID + ` LIMIT $3`)
)

// EndpointsParams are EndpointsSQLite's parameters.
type EndpointsParams struct {
	Now    time.Time // $1: the claim's clock
	AppID  int       // $2
	PerApp int       // $3: the cap of attempts in flight per app
}

func (p EndpointsParams) Args() []any { return []any{p.Now, p.AppID, p.PerApp} }

// EndpointDueParams are EndpointDueSQLite's parameters.
type EndpointDueParams struct {
	Now        time.Time // $1: the claim's clock
	EndpointID int       // $2
	Limit      int       // $3: the most deliveries to list
}

func (p EndpointDueParams) Args() []any { return []any{p.Now, p.EndpointID, p.Limit} }

var (
	// NextDueSQL is the earliest due time after $1 (the clock of the last
	// claim) of a delivery this process could claim then (of an enabled
	// endpoint of an app that may receive). Rows due at $1 but not
	// claimed are blocked (their app or endpoint is at its cap, or
	// another replica is claiming it): a finishing attempt wakes the loop
	// for those.
	NextDueSQL = `SELECT min(n) FROM (SELECT ` +
		oldestOf(`d.`+webhookdelivery.FieldNextAttemptAt+` > $1 AND (d.`+webhookdelivery.FieldLeaseUntil+` IS NULL OR d.`+webhookdelivery.FieldLeaseUntil+` < $1)`) + ` AS n
FROM ` + apps + ` a WHERE ` + receiving + `) x`
)

// NextDueParams are NextDueSQL's parameters.
type NextDueParams struct {
	ClaimedAt time.Time // $1: the clock of the last claim
	DayAgo    time.Time // $2: ClaimedAt less a day (see AppsParams)
}

func (p NextDueParams) Args() []any { return []any{p.ClaimedAt, p.DayAgo} }

// The settings ClaimPostgres's batch makes for its transaction (see
// Service.claimPostgres): generic plans, made once per connection, and
// no sequential scans for the claim. Neither has parameters.
const (
	GenericPlansPostgres = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`
	NoSeqScanPostgres    = `SELECT set_config('enable_seqscan', 'off', true)`
)

// LeaseSQLite and JobSQLite lease one delivery and read it (claimSQLite).
const (
	LeaseSQLite = `UPDATE ` + deliveries + ` SET ` + webhookdelivery.FieldLeaseUntil + ` = $2 WHERE ` + webhookdelivery.FieldID + ` = $3 AND ` + webhookdelivery.FieldStatus + ` IN ('PENDING', 'RETRYING') AND (` + webhookdelivery.FieldLeaseUntil + ` IS NULL OR ` + webhookdelivery.FieldLeaseUntil + ` < $1)`
	JobSQLite   = `SELECT ` + JobColumns + ` FROM ` + deliveries + ` WHERE ` + webhookdelivery.FieldID + ` = $1`
)

// LeaseParams are LeaseSQLite's parameters; JobSQLite's is a
// DeliveryParams.
type LeaseParams struct {
	Now        time.Time // $1: the claim's clock
	Lease      time.Time // $2: the lease_until to give
	DeliveryID int64     // $3
}

func (p LeaseParams) Args() []any { return []any{p.Now, p.Lease, p.DeliveryID} }

// The outcome of an attempt is one statement on Postgres (the attempt row
// inserted and the delivery moved on together) and one short transaction
// of two on SQLite. The delivery moves only while the worker still holds
// its lease (lease_until = the claim's value); the attempt is stored
// either way, since it happened.
const (
	InsertAttempt = `INSERT INTO ` + attempts + ` (` + deliveryattempt.FieldDeliveryID + `, ` + deliveryattempt.FieldAttemptNo + `, ` + deliveryattempt.FieldRequestHeaders + `, ` + deliveryattempt.FieldRequestBody + `, ` + deliveryattempt.FieldResponseStatus + `,
  ` + deliveryattempt.FieldResponseHeaders + `, ` + deliveryattempt.FieldResponseBody + `, ` + deliveryattempt.FieldError + `, ` + deliveryattempt.FieldDurationMs + `, ` + deliveryattempt.FieldStartedAt + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	MoveDelivery = `UPDATE ` + deliveries + ` SET ` + webhookdelivery.FieldStatus + ` = $3, ` + webhookdelivery.FieldRetryCount + ` = $4, ` + webhookdelivery.FieldNextAttemptAt + ` = COALESCE($5, ` + webhookdelivery.FieldNextAttemptAt + `),
  ` + webhookdelivery.FieldLastError + ` = $6, ` + webhookdelivery.FieldAttemptCount + ` = $2, ` + webhookdelivery.FieldLeaseUntil + ` = NULL, ` + webhookdelivery.FieldUpdateTime + ` = $7 WHERE ` + webhookdelivery.FieldID + ` = $1 AND ` + webhookdelivery.FieldLeaseUntil + ` = $8`
	// RecordPostgres is both in one statement: the insert's parameters
	// ($1-$10), then the update's ($1, $2 and $11-$16 for its $3-$8).
	RecordPostgres = `WITH a AS (` + InsertAttempt + `) UPDATE ` + deliveries + ` SET ` + webhookdelivery.FieldStatus + ` = $11, ` + webhookdelivery.FieldRetryCount + ` = $12,
  ` + webhookdelivery.FieldNextAttemptAt + ` = COALESCE($13, ` + webhookdelivery.FieldNextAttemptAt + `), ` + webhookdelivery.FieldLastError + ` = $14, ` + webhookdelivery.FieldAttemptCount + ` = $2, ` + webhookdelivery.FieldLeaseUntil + ` = NULL, ` + webhookdelivery.FieldUpdateTime + ` = $15
  WHERE ` + webhookdelivery.FieldID + ` = $1 AND ` + webhookdelivery.FieldLeaseUntil + ` = $16`
	// LastAttemptNo numbers an attempt when the fast path collided: a
	// worker that took the delivery over recorded the same number, or
	// the row predates attempt_count. Its parameter is a DeliveryParams.
	LastAttemptNo = `SELECT COALESCE(MAX(` + deliveryattempt.FieldAttemptNo + `), 0) FROM ` + attempts + ` WHERE ` + deliveryattempt.FieldDeliveryID + ` = $1`
)

// recordNumbered's lock of the delivery (parameters: DeliveryParams)
// before it reads LastAttemptNo: on Postgres the row's lock, so that two
// workers number their attempts in turn. On SQLite it only reads the row
// (the store begins transactions IMMEDIATE: they hold the one write lock
// already). A missing delivery fails both.
const (
	LockDeliverySQLite   = `SELECT ` + webhookdelivery.FieldID + ` FROM ` + deliveries + ` WHERE ` + webhookdelivery.FieldID + ` = $1`
	LockDeliveryPostgres = LockDeliverySQLite + ` FOR UPDATE`
)

// LockDelivery is recordNumbered's lock on backend d (a dialect name).
func LockDelivery(d string) string {
	if d == dialect.Postgres {
		return LockDeliveryPostgres
	}
	return LockDeliverySQLite
}

// DeliveryParams are the parameters of the Statements that read or lock
// one delivery by its id: LockDelivery, LastAttemptNo and JobSQLite.
type DeliveryParams struct {
	DeliveryID int // $1
}

func (p DeliveryParams) Args() []any { return []any{p.DeliveryID} }

// ReleaseSQL gives a lease back without counting an attempt; with
// next_attempt_at it also moves the delivery's next attempt.
const (
	ReleaseSQL  = `UPDATE ` + deliveries + ` SET ` + webhookdelivery.FieldLeaseUntil + ` = NULL WHERE ` + webhookdelivery.FieldID + ` = $1 AND ` + webhookdelivery.FieldLeaseUntil + ` = $2`
	PostponeSQL = `UPDATE ` + deliveries + ` SET ` + webhookdelivery.FieldLeaseUntil + ` = NULL, ` + webhookdelivery.FieldNextAttemptAt + ` = $3, ` + webhookdelivery.FieldUpdateTime + ` = $4 WHERE ` + webhookdelivery.FieldID + ` = $1 AND ` + webhookdelivery.FieldLeaseUntil + ` = $2`
)

// ReleaseParams are ReleaseSQL's parameters.
type ReleaseParams struct {
	DeliveryID int       // $1
	Lease      time.Time // $2: the lease given back, if it is still this worker's
}

func (p ReleaseParams) Args() []any { return []any{p.DeliveryID, p.Lease} }

// PostponeParams are PostponeSQL's parameters.
type PostponeParams struct {
	DeliveryID    int       // $1
	Lease         time.Time // $2: the lease given back, if it is still this worker's
	NextAttemptAt time.Time // $3
	UpdateTime    time.Time // $4
}

func (p PostponeParams) Args() []any {
	return []any{p.DeliveryID, p.Lease, p.NextAttemptAt, p.UpdateTime}
}

// DeferSQL moves every waiting delivery of an endpoint to the time its
// breaker lets trial calls through.
const DeferSQL = `UPDATE ` + deliveries + ` SET ` + webhookdelivery.FieldNextAttemptAt + ` = $3, ` + webhookdelivery.FieldUpdateTime + ` = $4
WHERE ` + webhookdelivery.FieldEndpointID + ` = $1 AND ` + webhookdelivery.FieldCallbackURL + ` = $2 AND ` + webhookdelivery.FieldStatus + ` IN ('PENDING', 'RETRYING') AND ` + webhookdelivery.FieldNextAttemptAt + ` < $3
  AND (` + webhookdelivery.FieldLeaseUntil + ` IS NULL OR ` + webhookdelivery.FieldLeaseUntil + ` < $4)`

// DeferParams are DeferSQL's parameters.
type DeferParams struct {
	EndpointID  int       // $1
	CallbackURL string    // $2: the URL the breaker is for
	Until       time.Time // $3: the breaker's half-open time, the new next_attempt_at
	Now         time.Time // $4: the update time; leases live at Now are left alone
}

func (p DeferParams) Args() []any { return []any{p.EndpointID, p.CallbackURL, p.Until, p.Now} }

// DueSQL counts (up to $3) the deliveries due at $1 of enabled endpoints
// of apps that may receive at $2: the backlog the dispatchers have not
// caught up with.
const DueSQL = `SELECT count(*) FROM (SELECT 1 FROM ` + deliveries + ` d JOIN ` + apps + ` a ON a.` + partnerapp.FieldID + ` = d.` + webhookdelivery.FieldAppID + `
JOIN ` + endpoints + ` e ON e.` + webhookendpoint.FieldID + ` = d.` + webhookdelivery.FieldEndpointID + `
WHERE d.` + webhookdelivery.FieldStatus + ` IN ('PENDING', 'RETRYING') AND d.` + webhookdelivery.FieldNextAttemptAt + ` <= $1 AND e.` + webhookendpoint.FieldEnabled + ` AND ` + receiving + ` LIMIT $3) x`

// DueParams are DueSQL's parameters.
type DueParams struct {
	Now    time.Time // $1
	DayAgo time.Time // $2: Now less a day (see AppsParams)
	Max    int       // $3: the count stops here
}

func (p DueParams) Args() []any { return []any{p.Now, p.DayAgo, p.Max} }

// The retention job's Statements. A batch is the oldest RetentionBatch
// final deliveries (SUCCESS, FAILED, CANCELLED) whose last change is
// older than the cut-off; their attempts go with them. On Postgres the
// batch is locked SKIP LOCKED, so replicas purging at once take disjoint
// batches, and a resend racing the purge either waits for it (the row is
// gone, NOT_FOUND) or wins (the row is no longer final and is kept).
const (
	finalCond = webhookdelivery.FieldStatus + ` IN ('SUCCESS', 'FAILED', 'CANCELLED') AND ` + webhookdelivery.FieldUpdateTime + ` < $1`

	PurgePostgres = `WITH doomed AS (
  SELECT ` + webhookdelivery.FieldID + ` FROM ` + deliveries + ` WHERE ` + finalCond + ` ORDER BY ` + webhookdelivery.FieldUpdateTime + `, ` + webhookdelivery.FieldID + ` LIMIT $2 FOR UPDATE SKIP LOCKED
), attempts AS (
  DELETE FROM ` + attempts + ` WHERE ` + deliveryattempt.FieldDeliveryID + ` IN (SELECT ` + webhookdelivery.FieldID + ` FROM doomed) RETURNING 1
), deliveries AS (
  DELETE FROM ` + deliveries + ` WHERE ` + webhookdelivery.FieldID + ` IN (SELECT ` + webhookdelivery.FieldID + ` FROM doomed) RETURNING 1
)
SELECT (SELECT count(*) FROM deliveries), (SELECT count(*) FROM attempts)`
)

var DoomedSQLite = sqliteLimits(`SELECT ` + webhookdelivery.FieldID + ` FROM ` + deliveries + ` WHERE ` + finalCond + ` ORDER BY ` + webhookdelivery.FieldUpdateTime + `, ` + webhookdelivery.FieldID + ` LIMIT $2`)

// RetentionParams are the parameters of PurgePostgres and DoomedSQLite.
type RetentionParams struct {
	Cutoff time.Time // $1: final deliveries last changed before it go
	Batch  int       // $2: the most deliveries of one batch
}

func (p RetentionParams) Args() []any { return []any{p.Cutoff, p.Batch} }

// PurgeAttemptsSQLite and PurgeDeliveriesSQLite delete, on SQLite and in
// DoomedSQLite's transaction, the k deliveries it chose: their attempts,
// then the deliveries. Their parameters are PurgeParams.
func PurgeAttemptsSQLite(k int) string {
	return `DELETE FROM ` + attempts + ` WHERE ` + deliveryattempt.FieldDeliveryID + ` IN (` + placeholders(k) + `)`
}

func PurgeDeliveriesSQLite(k int) string {
	return `DELETE FROM ` + deliveries + ` WHERE ` + webhookdelivery.FieldID + ` IN (` + placeholders(k) + `)`
}

// PurgeParams are the parameters of PurgeAttemptsSQLite and
// PurgeDeliveriesSQLite: the ids of the doomed deliveries, $1-$k.
type PurgeParams struct {
	DeliveryIDs []int64
}

func (p PurgeParams) Args() []any {
	a := make([]any, len(p.DeliveryIDs))
	for i, id := range p.DeliveryIDs {
		a[i] = id
	}
	return a
}

// placeholders is the list "$1, $2, …, $k".
func placeholders(k int) string {
	var b strings.Builder
	for i := 1; i <= k; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", i)
	}
	return b.String()
}

// RecordManyPostgres is RecordPostgres for several outcomes in one
// statement: their columns as arrays (RecordManyParams), one element per
// outcome, unnested into rows; every attempt inserted, every delivery
// still leased to its worker moved; it returns the ids of those. One text
// for any number of outcomes: it is prepared once per connection, and
// nothing is built per write (a VALUES list of k rows was a statement per
// k, whose text took 4 % of the dispatcher's CPU to build).
const RecordManyPostgres = `WITH v AS (
  SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::bigint[],
    $10::timestamptz[], $11::text[], $12::bigint[], $13::timestamptz[], $14::text[], $15::timestamptz[], $16::timestamptz[])
    AS v (id, no, rh, rb, rs, rsh, rsb, err, dur, started, status, rc, next, le, upd, lease)
), a AS (INSERT INTO ` + attempts + ` (` + deliveryattempt.FieldDeliveryID + `, ` + deliveryattempt.FieldAttemptNo + `, ` + deliveryattempt.FieldRequestHeaders + `, ` + deliveryattempt.FieldRequestBody + `, ` + deliveryattempt.FieldResponseStatus + `, ` + deliveryattempt.FieldResponseHeaders + `,
  ` + deliveryattempt.FieldResponseBody + `, ` + deliveryattempt.FieldError + `, ` + deliveryattempt.FieldDurationMs + `, ` + deliveryattempt.FieldStartedAt + `) SELECT ` + webhookdelivery.FieldID + `, no, rh, rb, rs, rsh, rsb, err, dur, started FROM v)
UPDATE ` + deliveries + ` w SET ` + webhookdelivery.FieldStatus + ` = v.status, ` + webhookdelivery.FieldRetryCount + ` = v.rc, ` + webhookdelivery.FieldNextAttemptAt + ` = COALESCE(v.next, w.` + webhookdelivery.FieldNextAttemptAt + `),
  ` + webhookdelivery.FieldLastError + ` = v.le, ` + webhookdelivery.FieldAttemptCount + ` = v.no, ` + webhookdelivery.FieldLeaseUntil + ` = NULL, ` + webhookdelivery.FieldUpdateTime + ` = v.upd
FROM v WHERE w.` + webhookdelivery.FieldID + ` = v.id AND w.` + webhookdelivery.FieldLeaseUntil + ` = v.lease RETURNING w.` + webhookdelivery.FieldID

// HandoffSQLite hands work off (see the dispatcher's work): run in the
// outcomes' transaction after endpoint $5's delivered outcome moved its
// delivery, it leases the endpoint's next due delivery to that worker.
// The lease that ended and the one that begins are one transaction, so
// neither the app's nor the endpoint's count of attempts in flight
// grows; the endpoint must be enabled, its app receiving, and the
// endpoint under its share (which shrinks when another endpoint of the
// app is enabled). Its parameters are HandoffParams.
var HandoffSQLite = sqliteLimits(`UPDATE ` + deliveries + ` SET ` + webhookdelivery.FieldLeaseUntil + ` = $4 WHERE ` + webhookdelivery.FieldID + ` = (
  SELECT x.` + webhookdelivery.FieldID + ` FROM (` + waitingOf("$5", dueCond, "1") + `) AS x ORDER BY x.` + webhookdelivery.FieldNextAttemptAt + `, x.` + webhookdelivery.FieldID + ` LIMIT 1)
AND EXISTS (SELECT 1 FROM ` + endpoints + ` e JOIN ` + apps + ` a ON a.` + partnerapp.FieldID + ` = e.` + webhookendpoint.FieldAppID + `
  WHERE e.` + webhookendpoint.FieldID + ` = $5 AND e.` + webhookendpoint.FieldEnabled + ` AND ` + receiving + ` AND ` + busyOfEndpoint + ` < ` + shareOf + `)
RETURNING ` + JobColumns)

// HandoffParams are HandoffSQLite's parameters.
type HandoffParams struct {
	Now        time.Time // $1
	DayAgo     time.Time // $2: Now less a day (see AppsParams)
	PerApp     int       // $3: the cap of attempts in flight per app
	Lease      time.Time // $4: the lease_until to give
	EndpointID int       // $5: the endpoint whose delivery moved
}

func (p HandoffParams) Args() []any { return []any{p.Now, p.DayAgo, p.PerApp, p.Lease, p.EndpointID} }
