package adapter

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// A claim must reach the waiting rows through the per-app index and lease
// them by primary key, whatever Postgres believed of the table when it
// planned the statement: the plans are the generic ones the dispatcher
// runs (ClaimPostgres forces them), made once per connection and kept
// until the table's statistics change. Two beliefs went wrong before:
//
//   - quiet statistics: nearly every row final, so waiting rows look rare;
//     with the retention index then on (status, update_time) the planner
//     took it as the cheapest way to them;
//   - an outbox that was empty when the connection first claimed.
//
// Either way a burst then made every claim of 16 walk the whole backlog
// (5 000 rows here, 30–54 ms a claim, and the load harness's drain of a
// burst ran at half speed).
func TestClaimPlanAfterQuietStatistics(t *testing.T) {
	const burst = 5000
	t.Run("quiet statistics", func(t *testing.T) {
		o := newPlanOutbox(t)
		o.deliveries("SUCCESS", "old-", 4*burst, "now()")
		o.exec(`ANALYZE webhook_deliveries`)
		o.deliveries("PENDING", "new-", burst, "now() - interval '1 second'")
		o.prepare()
		o.checkClaim(burst)
	})
	t.Run("planned on an empty outbox", func(t *testing.T) {
		o := newPlanOutbox(t)
		o.prepare()
		o.exec(`BEGIN`)
		o.exec(`EXECUTE lock_apps(` + o.args(false) + `)`)
		o.exec(`EXECUTE claim(` + o.args(true) + `)`)
		o.exec(`COMMIT`)
		o.deliveries("PENDING", "new-", burst, "now() - interval '1 second'")
		o.checkClaim(burst)
	})
}

// planOutbox is a fresh Postgres database with 8 receiving apps (one
// endpoint each), and one connection of it.
type planOutbox struct {
	t    *testing.T
	conn *sql.Conn
	now  time.Time
}

func newPlanOutbox(t *testing.T) *planOutbox {
	db := storetest.OpenURL(t, testenv.PostgresURL(t))
	conn, err := db.SQL.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	o := &planOutbox{t: t, conn: conn, now: time.Now()}
	o.exec(`INSERT INTO partner_apps (app_name, app_key, secret, status, create_time, update_time)
SELECT 'app ' || i, 'key' || i, '\x00', 1, now(), now() FROM generate_series(1, 8) i`)
	o.exec(`INSERT INTO webhook_endpoints (app_id, url, description, enabled, secret, create_time, update_time)
SELECT id, 'https://partner.example/hook', '', true, '\x00', now(), now() FROM partner_apps ORDER BY id`)
	return o
}

func (o *planOutbox) exec(q string, args ...any) {
	o.t.Helper()
	if _, err := o.conn.ExecContext(context.Background(), q, args...); err != nil {
		o.t.Fatalf("%s: %v", q, err)
	}
}

// deliveries adds n deliveries of status, spread over the apps.
func (o *planOutbox) deliveries(status, prefix string, n int, due string) {
	o.t.Helper()
	o.exec(`INSERT INTO webhook_deliveries (app_id, endpoint_id, event_id, event_type, biz_data, callback_url, status, next_attempt_at, create_time, update_time)
SELECT (SELECT min(id) FROM partner_apps) + i % 8, (SELECT min(id) FROM webhook_endpoints) + i % 8, $1 || i, 'order.paid', '{}', 'https://partner.example/hook', $2, `+due+`, now(), now()
FROM generate_series(1, $3::int) i`, prefix, status, n)
}

// prepare prepares the claim's two Statements with generic plans.
func (o *planOutbox) prepare() {
	o.t.Helper()
	o.exec(`SET plan_cache_mode = force_generic_plan`)
	o.exec(`SET enable_seqscan = off`) // as ClaimPostgres sets them
	o.exec(`PREPARE lock_apps (timestamptz, timestamptz, bigint, bigint) AS ` + LockAppsPostgres)
	o.exec(`PREPARE claim (timestamptz, timestamptz, bigint, bigint) AS ` + ClaimPostgres)
}

// args are the Statements' parameters as literals: now, then the expire
// date cut-off (lock_apps) or the lease (claim), the per-app cap 4 and a
// batch of 16.
func (o *planOutbox) args(claim bool) string {
	second := o.now.Add(-24 * time.Hour)
	if claim {
		second = o.now.Add(time.Minute)
	}
	return fmt.Sprintf("'%s', '%s', 4, 16", DBTime(o.now).Format(time.RFC3339Nano), DBTime(second).Format(time.RFC3339Nano))
}

// checkClaim runs one claim under EXPLAIN ANALYZE and fails if a step of
// either statement read anything close to the backlog, or if the claim
// did not lease a full batch.
func (o *planOutbox) checkClaim(backlog int) {
	o.t.Helper()
	ctx := context.Background()
	// The claim runs now: on a slow machine inserting the backlog takes
	// seconds, and rows due "a second ago" must be due at the claim's now.
	o.now = time.Now()
	o.exec(`BEGIN`)
	defer o.exec(`ROLLBACK`)
	for _, stmt := range []string{"lock_apps", "claim"} {
		var out []byte
		if err := o.conn.QueryRowContext(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE `+stmt+`(`+o.args(stmt == "claim")+`)`).Scan(&out); err != nil {
			o.t.Fatalf("explain %s: %v", stmt, err)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			o.t.Fatalf("explain %s: %v %s", stmt, err, out)
		}
		// A claim of at most 16 over 8 apps reads a few rows per app.
		if n, node := plans[0].Plan.widest(); n >= backlog/5 {
			o.t.Errorf("%s reads %d rows in one step (%s) while %d wait: it walks the backlog\n%s", stmt, n, node, backlog, out)
		}
		if w, ok := plans[0].Plan.find("w"); stmt == "claim" && (!ok || w.index() != "webhook_deliveries_pkey") {
			o.t.Errorf("the claim leases its rows by %s %q, want the primary key\n%s", w.NodeType, w.index(), out)
		}
	}
	var leased int
	if err := o.conn.QueryRowContext(ctx, `SELECT count(*) FROM webhook_deliveries WHERE lease_until IS NOT NULL`).Scan(&leased); err != nil {
		o.t.Fatal(err)
	}
	if leased != 16 {
		o.t.Errorf("the claim leased %d deliveries, want 16", leased)
	}
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Alias         string     `json:"Alias"`
	IndexName     string     `json:"Index Name"`
	ActualRows    float64    `json:"Actual Rows"`
	ActualLoops   float64    `json:"Actual Loops"`
	RemovedFilter float64    `json:"Rows Removed by Filter"`
	RemovedJoin   float64    `json:"Rows Removed by Join Filter"`
	Plans         []planNode `json:"Plans"`
}

// widest returns the most rows one node of the tree read (returned and
// filtered out, over all its loops) and that node.
func (p planNode) widest() (int, string) {
	n := int((p.ActualRows + p.RemovedFilter + p.RemovedJoin) * max(p.ActualLoops, 1))
	what := p.NodeType
	if p.IndexName != "" {
		what += " using " + p.IndexName
	}
	for _, c := range p.Plans {
		if cn, cw := c.widest(); cn > n {
			n, what = cn, cw
		}
	}
	return n, what
}

// find returns the node that reads the table aliased alias.
func (p planNode) find(alias string) (planNode, bool) {
	if p.Alias == alias && p.NodeType != "ModifyTable" {
		return p, true
	}
	for _, c := range p.Plans {
		if n, ok := c.find(alias); ok {
			return n, true
		}
	}
	return planNode{}, false
}

// index is the index a scan reads: its own, or its bitmap's.
func (p planNode) index() string {
	if p.NodeType == "Bitmap Heap Scan" && len(p.Plans) == 1 {
		return p.Plans[0].index()
	}
	return p.IndexName
}
