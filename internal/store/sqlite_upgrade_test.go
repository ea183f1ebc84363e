package store_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/internal/store"
)

// oldSQLite makes, at a new path, an embedded database as the old code's
// auto-migrate left it: the schema of the fixture (testdata/<fixture>,
// dumped from such a database) and no revisions. It returns the path and
// a connection of the old kind (foreign keys on) to insert rows with.
func oldSQLite(t *testing.T, fixture string) (string, *sql.DB) {
	t.Helper()
	ddl, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gatehouse.db")
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_time_format=sqlite")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	if _, err := old.Exec(string(ddl)); err != nil {
		t.Fatal(err)
	}
	return path, old
}

// TestSQLiteAdoptsBeforeEndpoints: an embedded database of a release
// before webhook endpoints, with apps and deliveries made the old way, is
// adopted at the first SQLite file at start; the endpoints file then
// turns each app's callback URL into its first endpoint, in SQL (what a
// Go step used to do after auto-migrate), and nothing is lost.
func TestSQLiteAdoptsBeforeEndpoints(t *testing.T) {
	ctx := context.Background()
	files := migrationFiles(t, dialect.SQLite)
	path, old := oldSQLite(t, "sqlite_before_endpoints.sql")
	o := insertOldWebhooks(t, old)
	if _, err := old.Exec(`INSERT INTO tickets (title, status, created_at) VALUES ('kept', 'OPEN', ?)`, time.Now()); err != nil {
		t.Fatal(err)
	}
	old.Close()

	db := openSQLite(t, path)
	migrateAdoptingAtFirst(t, db, files)
	checkUpgraded(t, db, o)
	if n, err := db.Ticket.Query().Count(ctx); err != nil || n != 1 {
		t.Fatalf("tickets: %d %v", n, err)
	}
	var n int
	if err := db.SQL.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = 'webhook_deliveries_event_id_key'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the one-delivery-per-event index is still there (%d, %v)", n, err)
	}
	if pending, err := store.PendingSchemaChanges(ctx, db); err != nil || pending != "" {
		t.Fatalf("after adoption Ent would still run %q (%v)", pending, err)
	}
	// Started again: nothing more happens.
	if rep, err := db.MigrateReport(ctx); err != nil || rep.Changed() {
		t.Fatalf("second start: %v %v", rep, err)
	}
	checkUpgraded(t, db, o)
	if st, err := db.MigrationStatus(ctx); err != nil || st.Unadopted || len(st.Pending) != 0 || !st.Applied[0].Baseline {
		t.Fatalf("status after: %+v %v", st, err)
	}
}

// TestSQLiteAdoptsAutoMigrated: an embedded database of the last release
// whose auto-migrate kept it — made by it, or by the first release and
// carried along by later ones — is adopted at the file that holds that
// release's schema, its rows intact; one that lacks what the file has
// gets it; one changed by hand is refused with the differences named.
func TestSQLiteAdoptsAutoMigrated(t *testing.T) {
	ctx := context.Background()
	files := migrationFiles(t, dialect.SQLite)
	at := ""
	for i, f := range files {
		if strings.HasPrefix(f, "20261129021408_") {
			at = files[i]
		}
	}
	for _, tc := range []struct {
		name, fixture string
		change        string // made by hand after the fixture
		repaired      []string
		refused       []string
	}{
		{name: "as the last release made it", fixture: "sqlite_auto_migrated.sql"},
		{name: "carried since the first release", fixture: "sqlite_auto_migrated_since_first_release.sql"},
		{
			name: "from an older release", fixture: "sqlite_auto_migrated.sql",
			change:   "ALTER TABLE webhook_endpoints DROP COLUMN client_key; DROP INDEX portallink_expires_at",
			repaired: []string{"webhook_endpoints: add column client_key", "portal_links: add index portallink_expires_at"},
		},
		{
			name: "changed by hand", fixture: "sqlite_auto_migrated.sql",
			change:  "ALTER TABLE tickets ADD COLUMN note text",
			refused: []string{"tickets: column note is not in the baseline"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, old := oldSQLite(t, tc.fixture)
			appID, endpointID := insertAutoMigratedRows(t, old)
			if tc.change != "" {
				if _, err := old.Exec(tc.change); err != nil {
					t.Fatal(err)
				}
			}
			old.Close()
			db := openSQLite(t, path)
			rep, err := db.MigrateReport(ctx)
			if tc.refused != nil {
				for _, r := range tc.refused {
					if err == nil || !strings.Contains(err.Error(), r) {
						t.Fatalf("err = %v, want it to name %q", err, r)
					}
				}
				if st, err := db.MigrationStatus(ctx); err != nil || !st.Unadopted || len(st.Applied) != 0 {
					t.Fatalf("a refused adoption recorded something: %+v %v", st, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(rep.Repaired, ", ")
			if rep.Adopted != at || len(rep.Repaired) != len(tc.repaired) {
				t.Fatalf("report %+v, want adopted at %s", rep, at)
			}
			for _, r := range tc.repaired {
				if !strings.Contains(got, r) {
					t.Fatalf("repaired %q, want %q", got, r)
				}
			}
			ep, err := db.WebhookEndpoint.Get(ctx, endpointID)
			if err != nil || ep.AppID != appID || ep.URL != "https://kept.example/hook" || len(ep.EventTypes) != 1 {
				t.Fatalf("endpoint %+v %v", ep, err)
			}
			if d, err := db.WebhookDelivery.Query().Only(ctx); err != nil || d.EndpointID == nil || *d.EndpointID != endpointID {
				t.Fatalf("delivery %+v %v", d, err)
			}
			if pending, err := store.PendingSchemaChanges(ctx, db); err != nil || pending != "" {
				t.Fatalf("after adoption Ent would still run %q (%v)", pending, err)
			}
		})
	}
}

// insertAutoMigratedRows writes an app with one endpoint and a delivery to
// it, as the last auto-migrating release stored them.
func insertAutoMigratedRows(t *testing.T, db *sql.DB) (appID, endpointID int) {
	t.Helper()
	now := time.Now().UTC()
	if err := db.QueryRow(`INSERT INTO partner_apps (app_name, app_key, secret, status, rate_limit, create_time, update_time)
VALUES ('kept', 'kept', x'01', 1, 1000, $1, $1) RETURNING id`, now).Scan(&appID); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`INSERT INTO webhook_endpoints (app_id, url, description, event_types, enabled, secret, create_time, update_time)
VALUES ($1, 'https://kept.example/hook', '', '["order.paid"]', true, x'02', $2, $2) RETURNING id`, appID, now).Scan(&endpointID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO webhook_deliveries (app_id, endpoint_id, event_id, event_type, biz_data, callback_url,
  next_attempt_at, create_time, update_time) VALUES ($1, $2, 'msg_kept', 'order.paid', '{}', 'https://kept.example/hook', $3, $3, $3)`,
		appID, endpointID, now); err != nil {
		t.Fatal(err)
	}
	return appID, endpointID
}
