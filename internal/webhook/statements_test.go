package webhook

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"entgo.io/ent/dialect"

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
			url = "sqlite:" + filepath.Join(t.TempDir(), "statements.db")
		}
		db := storetest.OpenURL(t, url)
		ctx := context.Background()
		now := dbTime(time.Now())
		app := db.PartnerApp.Create().SetAppName("statements").SetAppKey("statements-" + testenv.RandomSuffix()).SetSecret([]byte{1}).SaveX(ctx)
		ep := db.WebhookEndpoint.Create().SetAppID(app.ID).SetURL("https://partner.example/hook").SetSecret([]byte{1}).
			SetCreateTime(now).SetUpdateTime(now).SaveX(ctx)
		lease := now.Add(time.Minute)
		d := db.WebhookDelivery.Create().SetAppID(app.ID).SetEndpointID(ep.ID).SetEventID("msg_statements").SetEventType("order.paid").
			SetBizData(`{}`).SetCallbackURL(ep.URL).SetNextAttemptAt(now.Add(-time.Second)).SetCreateTime(now).SetUpdateTime(now).
			SetLeaseUntil(lease).SaveX(ctx)
		outcome := outcomeParams{
			DeliveryID: d.ID, AttemptNo: 1,
			Attempt: attemptRow{reqHeaders: `{}`, reqBody: `{}`, status: sql.NullInt64{Int64: 500, Valid: true}, durationMs: 3, startedAt: now},
			Status:  string(StatusRetrying), RetryCount: 1, NextAttemptAt: now.Add(time.Second),
			LastError: sql.NullString{String: "HTTP 500", Valid: true}, UpdateTime: now, Lease: lease,
		}
		locked := deliveryLockParams{DeliveryID: d.ID}
		doomed := purgeParams{DeliveryIDs: []int64{int64(d.ID), int64(d.ID) + 1}}
		pg, lite := b.DatabaseURL != "", b.Embedded()
		dayAgo := now.Add(-24 * time.Hour)
		for _, c := range []struct {
			name string
			on   bool // the backend runs it
			q    string
			args []any
		}{
			{"appsSQL", pg, appsSQL, []any{now, dayAgo, 4, 16}},
			{"appsSQLite", lite, appsSQLite, []any{now, dayAgo, 4, 16}},
			{"genericPlansPostgres", pg, genericPlansPostgres, nil},
			{"lockAppsPostgres", pg, lockAppsPostgres, []any{now, dayAgo, 4, 16}},
			{"noSeqScanPostgres", pg, noSeqScanPostgres, nil},
			{"claimPostgres", pg, claimPostgres, []any{now, lease, 4, 16}},
			{"endpointsSQLite", lite, endpointsSQLite, []any{now, app.ID, 4}},
			{"endpointDueSQLite", lite, endpointDueSQLite, []any{now, ep.ID, 4}},
			{"leaseSQLite", lite, leaseSQLite, []any{now, lease, d.ID}},
			{"jobSQLite", lite, jobSQLite, []any{d.ID}},
			{"nextDueSQL", true, nextDueSQL, []any{now, dayAgo}},
			{"dueSQL", true, dueSQL, []any{now, dayAgo, maxBacklogCount}},
			{"insertAttempt", true, insertAttempt, outcome.attemptArgs()},
			{"moveDelivery", true, moveDelivery, outcome.moveArgs()},
			{"recordPostgres", pg, recordPostgres, outcome.args()},
			{"recordManyPostgres", pg, recordManyPostgres(1), outcome.args()},
			{"handoffSQLite", lite, handoffSQLite, []any{now, dayAgo, 4, lease, ep.ID}},
			{"lockDeliveryPostgres", pg, lockDeliveryPostgres, locked.args()},
			{"lockDeliverySQLite", lite, lockDeliverySQLite, locked.args()},
			{"lastAttemptNo", true, lastAttemptNo, []any{d.ID}},
			{"releaseSQL", true, releaseSQL, []any{d.ID, lease}},
			{"postponeSQL", true, postponeSQL, []any{d.ID, lease, now.Add(time.Second), now}},
			{"deferSQL", true, deferSQL, []any{ep.ID, ep.URL, now.Add(time.Minute), now}},
			{"purgePostgres", pg, purgePostgres, []any{now, 10}},
			{"doomedSQLite", lite, doomedSQLite, []any{now, 10}},
			{"purgeAttemptsSQLite", lite, purgeAttemptsSQLite(len(doomed.DeliveryIDs)), doomed.args()},
			{"purgeDeliveriesSQLite", lite, purgeDeliveriesSQLite(len(doomed.DeliveryIDs)), doomed.args()},
			{"lockCataloguePostgres", pg, lockCataloguePostgres, nil},
			{"lockCatalogueSQLite", lite, lockCatalogueSQLite, nil},
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
		"appsSQLite": appsSQLite, "endpointsSQLite": endpointsSQLite, "endpointDueSQLite": endpointDueSQLite,
		"handoffSQLite": handoffSQLite, "doomedSQLite": doomedSQLite, "nextDueSQL": nextDueSQL,
		"leaseSQLite": leaseSQLite, "jobSQLite": jobSQLite, "insertAttempt": insertAttempt, "moveDelivery": moveDelivery,
		"lockDeliverySQLite": lockDeliverySQLite, "purgeAttemptsSQLite": purgeAttemptsSQLite(2), "purgeDeliveriesSQLite": purgeDeliveriesSQLite(2),
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

// TestCatalogueLockTakesSQLiteWriter: lockCatalogueSQLite takes SQLite's
// write lock by itself, in a transaction begun DEFERRED (the store's begin
// IMMEDIATE and hold it already), so a declaration's count cannot be read
// while another writer may still insert.
func TestCatalogueLockTakesSQLiteWriter(t *testing.T) {
	dsn := "file:" + filepath.Join(t.TempDir(), "lock.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(0)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE webhook_event_types (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil) // DEFERRED: no lock yet
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, lockCatalogue(dialect.SQLite)); err != nil {
		t.Fatal(err)
	}
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, `BEGIN IMMEDIATE`); err == nil {
		_, _ = other.ExecContext(ctx, `ROLLBACK`)
		t.Fatal("another writer began while the catalogue's lock was held")
	}
}
