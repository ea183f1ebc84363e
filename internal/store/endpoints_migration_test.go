package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/store"
)

// oldWebhooks are the rows of a database from before webhook endpoints:
// apps with a callback URL and webhook secrets (one mid-rotation), one
// whose callback URL was cleared after deliveries were made, one without
// either, and deliveries of every status with their attempts.
type oldWebhooks struct {
	rotated, cleared, plain, none int
	deliveries                    map[int]int // delivery id → app id
	attempts                      int
}

// insertOldWebhooks writes them with SQL of the old schema (no endpoint
// column is named).
func insertOldWebhooks(t *testing.T, db *sql.DB) oldWebhooks {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	app := func(key, url string, secret, previous []byte) int {
		var id int
		q := `INSERT INTO partner_apps (app_name, app_key, secret, status, rate_limit, callback_url, webhook_secret, previous_webhook_secret,
  previous_webhook_secret_expires_at, create_time, update_time) VALUES ($1, $1, $2, 1, 1000, $3, $4, $5, $6, $7, $7) RETURNING id`
		var until, prev any // NULL unless mid-rotation
		if previous != nil {
			until, prev = now.Add(time.Hour), previous
		}
		if err := db.QueryRowContext(ctx, q, key, []byte("sealed-app"), url, secret, prev, until, now).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	o := oldWebhooks{deliveries: map[int]int{}}
	o.rotated = app("rotated", "https://rotated.example/hook", []byte("sealed-new"), []byte("sealed-old"))
	o.cleared = app("cleared", "", []byte("sealed-c"), nil)
	o.plain = app("plain", "https://plain.example/hook", []byte("sealed-p"), nil)
	o.none = app("none", "", []byte("sealed-n"), nil)
	n := 0
	for _, a := range []struct {
		id  int
		url string
	}{{o.rotated, "https://rotated.example/hook"}, {o.cleared, "https://cleared.example/old"}, {o.plain, "https://plain.example/hook"}} {
		for _, st := range []string{"PENDING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED"} {
			n++
			var id int
			if err := db.QueryRowContext(ctx, `INSERT INTO webhook_deliveries (app_id, event_id, event_type, biz_data, callback_url, status,
  retry_count, attempt_count, max_retry, next_attempt_at, create_time, update_time) VALUES ($1, $2, 'order.paid', '{}', $3, $4, 1, 2, 5, $5, $5, $5) RETURNING id`,
				a.id, "msg_old_"+string(rune('a'+n)), a.url, st, now).Scan(&id); err != nil {
				t.Fatal(err)
			}
			o.deliveries[id] = a.id
			for no := 1; no <= 2; no++ {
				if _, err := db.ExecContext(ctx, `INSERT INTO delivery_attempts (delivery_id, attempt_no, request_headers, request_body, duration_ms, started_at)
VALUES ($1, $2, '{}', '{}', 5, $3)`, id, no, now); err != nil {
					t.Fatal(err)
				}
				o.attempts++
			}
		}
	}
	return o
}

// checkUpgraded checks that every app with a callback URL has it as its
// first endpoint with its secrets, the app with deliveries but no URL a
// disabled one, and that every delivery and attempt is kept and belongs
// to its app's endpoint.
func checkUpgraded(t *testing.T, db *store.DB, o oldWebhooks) {
	t.Helper()
	ctx := context.Background()
	eps, err := db.Client.WebhookEndpoint.Query().Order(ent.Asc("id")).All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byApp := map[int]*ent.WebhookEndpoint{}
	for _, ep := range eps {
		if byApp[ep.AppID] != nil {
			t.Fatalf("app %d has two endpoints after the upgrade", ep.AppID)
		}
		byApp[ep.AppID] = ep
	}
	if len(eps) != 3 || byApp[o.none] != nil {
		t.Fatalf("%d endpoints (%v), want one each for the apps with a callback URL or deliveries", len(eps), byApp)
	}
	r := byApp[o.rotated]
	if r.URL != "https://rotated.example/hook" || !r.Enabled || string(r.Secret) != "sealed-new" ||
		r.PreviousSecret == nil || string(*r.PreviousSecret) != "sealed-old" || r.PreviousSecretExpiresAt == nil || len(r.EventTypes) != 0 {
		t.Fatalf("the rotated app's endpoint: %+v", r)
	}
	if p := byApp[o.plain]; p.URL != "https://plain.example/hook" || !p.Enabled || string(p.Secret) != "sealed-p" || p.PreviousSecretExpiresAt != nil {
		t.Fatalf("the plain app's endpoint: %+v", p)
	}
	if c := byApp[o.cleared]; c.URL != "https://cleared.example/old" || c.Enabled || string(c.Secret) != "sealed-c" {
		t.Fatalf("the app without callback URL: %+v, want a disabled endpoint at its deliveries' URL", c)
	}
	ds, err := db.Client.WebhookDelivery.Query().All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(o.deliveries) {
		t.Fatalf("%d deliveries after the upgrade, want %d", len(ds), len(o.deliveries))
	}
	for _, d := range ds {
		if d.EndpointID == nil || *d.EndpointID != byApp[o.deliveries[d.ID]].ID || d.AppID != o.deliveries[d.ID] {
			t.Fatalf("delivery %d (app %d) has endpoint %v, want its app's", d.ID, d.AppID, d.EndpointID)
		}
	}
	if n, err := db.Client.DeliveryAttempt.Query().Count(ctx); err != nil || n != o.attempts {
		t.Fatalf("%d attempts after the upgrade (%v), want %d", n, err, o.attempts)
	}
	waiting := 0
	for _, d := range ds {
		if d.Status == "PENDING" || d.Status == "RETRYING" {
			waiting++
		}
	}
	if waiting != 6 {
		t.Fatalf("%d waiting deliveries, want 6", waiting)
	}
}

// TestMigrationToEndpointsKeepsDeliveries: a Postgres database at the
// migration before webhook endpoints, holding apps and deliveries made
// the old way, gets the endpoints migration (and every later one):
// nothing is lost.
func TestMigrationToEndpointsKeepsDeliveries(t *testing.T) {
	ctx := context.Background()
	dir, err := store.PostgresMigrations()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := dir.Files()
	last := files[len(files)-1]
	for _, f := range files {
		if f.Desc() == "webhook_endpoints" {
			last = f
		}
	}
	db := openPostgres(t)
	apply := func(f interface{ Stmts() ([]string, error) }) {
		stmts, err := f.Stmts()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			if _, err := db.SQL.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	for _, f := range files {
		if f.Version() >= last.Version() {
			break
		}
		apply(f)
	}
	o := insertOldWebhooks(t, db.SQL)
	apply(last)
	for _, f := range files { // the later ones, as an upgrade applies them
		if f.Version() > last.Version() {
			apply(f)
		}
	}
	checkUpgraded(t, db, o)
}
