package adapter

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// TestEveryStatementRuns runs each raw SQL statement of the package on
// both backends (those written for one backend on it only), with
// parameters of the types the package passes, over rows it should touch:
// a statement a schema change broke, or a parameter of the wrong type,
// fails here rather than in the dispatcher's log. Each runs in a
// transaction that is rolled back.
func TestEveryStatementRuns(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		url := b.DatabaseURL
		if b.Embedded() {
			url = "sqlite:" + filepath.Join(t.TempDir(), "Statements.db")
		}
		db := storetest.OpenURL(t, url)
		ctx := context.Background()
		now := DBTime(time.Now())
		app, ep := appWithEndpoint(t, db, "Statements", now)
		lease := now.Add(time.Minute)
		d := db.WebhookDelivery.Create().SetAppID(app.ID).SetEndpointID(ep.ID).SetEventID("msg_statements").SetEventType("order.paid").
			SetBizData(`{}`).SetCallbackURL(ep.URL).SetNextAttemptAt(now.Add(-time.Second)).SetCreateTime(now).SetUpdateTime(now).
			SetLeaseUntil(lease).SaveX(ctx)
		outcome := OutcomeParams{
			DeliveryID: d.ID, AttemptNo: 1,
			Attempt: AttemptRow{ReqHeaders: `{}`, ReqBody: `{}`, Status: sql.NullInt64{Int64: 500, Valid: true}, DurationMs: 3, StartedAt: now},
			Status:  string(webhookdelivery.StatusRETRYING), RetryCount: 1, NextAttemptAt: new(now.Add(time.Second)),
			LastError: sql.NullString{String: "HTTP 500", Valid: true}, UpdateTime: now, Lease: lease,
		}
		byID := DeliveryParams{DeliveryID: d.ID}
		doomed := PurgeParams{DeliveryIDs: []int64{int64(d.ID), int64(d.ID) + 1}}
		pg, lite := b.DatabaseURL != "", b.Embedded()
		dayAgo := now.Add(-24 * time.Hour)
		apps := AppsParams{Now: now, DayAgo: dayAgo, PerApp: 4, Limit: 16}
		retention := RetentionParams{Cutoff: now, Batch: 10}
		for _, c := range []struct {
			name string
			on   bool // the backend runs it
			q    string
			args []any
		}{
			{"AppsSQL", pg, AppsSQL, apps.Args()},
			{"AppsSQLite", lite, AppsSQLite, apps.Args()},
			{"GenericPlansPostgres", pg, GenericPlansPostgres, nil},
			{"LockAppsPostgres", pg, LockAppsPostgres, apps.Args()},
			{"NoSeqScanPostgres", pg, NoSeqScanPostgres, nil},
			{"ClaimPostgres", pg, ClaimPostgres, ClaimParams{Now: now, Lease: lease, PerApp: 4, Limit: 16}.Args()},
			{"EndpointsSQLite", lite, EndpointsSQLite, EndpointsParams{Now: now, AppID: app.ID, PerApp: 4}.Args()},
			{"EndpointDueSQLite", lite, EndpointDueSQLite, EndpointDueParams{Now: now, EndpointID: ep.ID, Limit: 4}.Args()},
			{"LeaseSQLite", lite, LeaseSQLite, LeaseParams{Now: now, Lease: lease, DeliveryID: int64(d.ID)}.Args()},
			{"JobSQLite", lite, JobSQLite, byID.Args()},
			{"NextDueSQL", true, NextDueSQL, NextDueParams{ClaimedAt: now, DayAgo: dayAgo}.Args()},
			{"DueSQL", true, DueSQL, DueParams{Now: now, DayAgo: dayAgo, Max: 10000}.Args()},
			{"InsertAttempt", true, InsertAttempt, outcome.AttemptArgs()},
			{"MoveDelivery", true, MoveDelivery, outcome.MoveArgs()},
			{"RecordPostgres", pg, RecordPostgres, outcome.Args()},
			{"RecordManyPostgres", pg, RecordManyPostgres, ManyParams(outcome).Args()},
			{"HandoffSQLite", lite, HandoffSQLite, HandoffParams{Now: now, DayAgo: dayAgo, PerApp: 4, Lease: lease, EndpointID: ep.ID}.Args()},
			{"LockDeliveryPostgres", pg, LockDeliveryPostgres, byID.Args()},
			{"LockDeliverySQLite", lite, LockDeliverySQLite, byID.Args()},
			{"LastAttemptNo", true, LastAttemptNo, byID.Args()},
			{"ReleaseSQL", true, ReleaseSQL, ReleaseParams{DeliveryID: d.ID, Lease: lease}.Args()},
			{"PostponeSQL", true, PostponeSQL, PostponeParams{DeliveryID: d.ID, Lease: lease, NextAttemptAt: now.Add(time.Second), UpdateTime: now}.Args()},
			{"DeferSQL", true, DeferSQL, DeferParams{EndpointID: ep.ID, CallbackURL: ep.URL, Until: now.Add(time.Minute), Now: now}.Args()},
			{"PurgePostgres", pg, PurgePostgres, retention.Args()},
			{"DoomedSQLite", lite, DoomedSQLite, retention.Args()},
			{"PurgeAttemptsSQLite", lite, PurgeAttemptsSQLite(len(doomed.DeliveryIDs)), doomed.Args()},
			{"PurgeDeliveriesSQLite", lite, PurgeDeliveriesSQLite(len(doomed.DeliveryIDs)), doomed.Args()},
		} {
			if !c.on {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				tx, err := db.SQL.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				rows, err := tx.QueryContext(ctx, c.q, c.args...)
				if err != nil {
					t.Fatalf("%s on %s: %v", c.name, dialectOf(b), err)
				}
				for rows.Next() {
				}
				if err := rows.Err(); err != nil {
					t.Fatalf("%s on %s: %v", c.name, dialectOf(b), err)
				}
				rows.Close()
			})
		}
	})
}

// TestSQLiteLimitsAreNotBound: no statement SQLite runs binds a LIMIT
// (see sqliteLimits): each run of one would be parsed and planned anew.
func TestSQLiteLimitsAreNotBound(t *testing.T) {
	for name, q := range map[string]string{
		"AppsSQLite": AppsSQLite, "EndpointsSQLite": EndpointsSQLite, "EndpointDueSQLite": EndpointDueSQLite,
		"HandoffSQLite": HandoffSQLite, "DoomedSQLite": DoomedSQLite, "NextDueSQL": NextDueSQL,
		"LeaseSQLite": LeaseSQLite, "JobSQLite": JobSQLite, "InsertAttempt": InsertAttempt, "MoveDelivery": MoveDelivery,
		"LockDeliverySQLite": LockDeliverySQLite, "PurgeAttemptsSQLite": PurgeAttemptsSQLite(2), "PurgeDeliveriesSQLite": PurgeDeliveriesSQLite(2),
	} {
		if m := boundLimit.FindString(q); m != "" {
			t.Errorf("%s binds its limit (%s)", name, m)
		}
	}
	if got := sqliteLimits("SELECT 1 LIMIT $3"); got != "SELECT 1 LIMIT +$3" {
		t.Errorf("sqliteLimits: %q", got)
	}
}

func dialectOf(b testenv.Backend) string {
	if b.Embedded() {
		return dialect.SQLite
	}
	return dialect.Postgres
}

// TestRecordManyStoresEachOutcome: RecordManyPostgres stores each outcome
// of a group with its own values, nulls included (an attempt with no
// reply, a delivery whose due time is kept), and moves only the
// deliveries still leased to their workers.
func TestRecordManyStoresEachOutcome(t *testing.T) {
	db := storetest.OpenURL(t, testenv.PostgresURL(t))
	ctx := context.Background()
	now := DBTime(time.Now())
	app, ep := appWithEndpoint(t, db, "many", now)
	lease := now.Add(time.Minute)
	due := now.Add(-time.Second)
	var ids []int
	for _, e := range []string{"msg_a", "msg_b", "msg_c"} {
		ids = append(ids, db.WebhookDelivery.Create().SetAppID(app.ID).SetEndpointID(ep.ID).SetEventID(e).SetEventType("order.paid").
			SetBizData(`{}`).SetCallbackURL(ep.URL).SetNextAttemptAt(due).SetCreateTime(now).SetUpdateTime(now).
			SetLeaseUntil(lease).SaveX(ctx).ID)
	}
	retryAt := now.Add(time.Hour)
	later := now.Add(time.Second)
	delivered := OutcomeParams{
		DeliveryID: ids[0], AttemptNo: 1, Status: string(webhookdelivery.StatusSUCCESS), UpdateTime: later, Lease: lease,
		Attempt: AttemptRow{ReqHeaders: `{"a":"1"}`, ReqBody: `{"x":1}`, Status: sql.NullInt64{Int64: 204, Valid: true},
			RespHeaders: sql.NullString{String: `{"b":"2"}`, Valid: true}, RespBody: sql.NullString{String: "ok", Valid: true},
			DurationMs: 7, StartedAt: now},
	}
	unreachable := OutcomeParams{
		DeliveryID: ids[1], AttemptNo: 3, Status: string(webhookdelivery.StatusRETRYING), RetryCount: 2, NextAttemptAt: &retryAt,
		LastError: sql.NullString{String: "dial: refused", Valid: true}, UpdateTime: later, Lease: lease,
		Attempt: AttemptRow{ReqHeaders: `{}`, ReqBody: `{"x":2}`, Err: sql.NullString{String: "dial: refused", Valid: true}, StartedAt: now},
	}
	takenOver := delivered
	takenOver.DeliveryID, takenOver.Lease = ids[2], lease.Add(time.Second)
	rows, err := db.SQL.QueryContext(ctx, RecordManyPostgres, ManyParams(delivered, unreachable, takenOver).Args()...)
	if err != nil {
		t.Fatal(err)
	}
	moved := map[int]bool{}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		moved[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !moved[ids[0]] || !moved[ids[1]] || moved[ids[2]] || len(moved) != 2 {
		t.Fatalf("moved %v, want %d and %d", moved, ids[0], ids[1])
	}
	type state struct {
		status              string
		retries, attempts   int
		next                time.Time
		lastError           sql.NullString
		leased              bool
		attemptStatus       sql.NullInt64
		RespHeaders, errTxt sql.NullString
		ReqBody             string
		no, dur             int
	}
	read := func(id int) state {
		var s state
		err := db.SQL.QueryRowContext(ctx, `SELECT d.status, d.retry_count, d.attempt_count, d.next_attempt_at, d.last_error, d.lease_until IS NOT NULL,
  a.response_status, a.response_headers, a.error, a.request_body, a.attempt_no, a.duration_ms
FROM webhook_deliveries d JOIN delivery_attempts a ON a.delivery_id = d.id WHERE d.id = $1`, id).
			Scan(&s.status, &s.retries, &s.attempts, &s.next, &s.lastError, &s.leased, &s.attemptStatus, &s.RespHeaders, &s.errTxt, &s.ReqBody, &s.no, &s.dur)
		if err != nil {
			t.Fatalf("delivery %d: %v", id, err)
		}
		return s
	}
	if s := read(ids[0]); s.status != "SUCCESS" || s.attempts != 1 || !s.next.Equal(due) || s.leased || s.attemptStatus.Int64 != 204 ||
		s.RespHeaders.String != `{"b":"2"}` || s.errTxt.Valid || s.ReqBody != `{"x":1}` || s.dur != 7 {
		t.Errorf("delivered: %+v", s)
	}
	if s := read(ids[1]); s.status != "RETRYING" || s.retries != 2 || s.attempts != 3 || !s.next.Equal(retryAt) || s.leased ||
		s.lastError.String != "dial: refused" || s.attemptStatus.Valid || s.RespHeaders.Valid || s.errTxt.String != "dial: refused" || s.no != 3 {
		t.Errorf("unreachable: %+v", s)
	}
	if s := read(ids[2]); s.status != "PENDING" || s.attempts != 0 || !s.leased || s.no != 1 {
		t.Errorf("taken over: %+v (its attempt is stored, the delivery must not move)", s)
	}
}

// appWithEndpoint makes an app named name with one endpoint, written as
// of now, for the Statements to run over.
func appWithEndpoint(t *testing.T, db *store.DB, name string, now time.Time) (*ent.PartnerApp, *ent.WebhookEndpoint) {
	t.Helper()
	ctx := context.Background()
	app := db.PartnerApp.Create().SetAppName(name).SetAppKey(name + "-" + testenv.RandomSuffix()).SetSecret([]byte{1}).SaveX(ctx)
	ep := db.WebhookEndpoint.Create().SetAppID(app.ID).SetURL("https://partner.example/hook").SetSecret([]byte{1}).
		SetCreateTime(now).SetUpdateTime(now).SaveX(ctx)
	return app, ep
}
