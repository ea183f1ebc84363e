package publishdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/ent/webhookpublication"
)

// The statements below are sent over pgx directly, in batches (one round
// trip for several statements), by the publish path on Postgres: the
// group's transaction is BEGIN, TargetsPostgres and ClaimKeysPostgres in
// one batch, then InsertDeliveriesPostgres and COMMIT in another (and,
// only when a key was taken already, TakenByPostgres between them).

// TargetsPostgres reads a group's apps ($1 their ids) and their
// endpoints, in (app, endpoint) order: a row per endpoint, and one with a
// NULL endpoint for an app that has none. Only what the fan-out reads of
// an endpoint is read (see ScanTargets).
var TargetsPostgres = fmt.Sprintf(`SELECT a.%[2]s, e.%[4]s, e.%[5]s, e.%[6]s::text, e.%[7]s, e.%[8]s, e.%[9]s::text
FROM %[1]s a LEFT JOIN %[3]s e ON e.%[10]s = a.%[2]s
WHERE a.%[2]s = ANY($1::bigint[])
ORDER BY a.%[2]s, e.%[4]s`,
	partnerapp.Table, partnerapp.FieldID, webhookendpoint.Table,
	webhookendpoint.FieldID, webhookendpoint.FieldURL, webhookendpoint.FieldEventTypes, webhookendpoint.FieldEnabled,
	webhookendpoint.FieldAutoDisabledAt, webhookendpoint.FieldRetrySchedule, webhookendpoint.FieldAppID)

// ScanTargets reads TargetsPostgres's rows: the apps found (only their
// ids are set) and their endpoints by app, in id order (only the ids,
// app, URL, event types, enabled, auto-disable time and retry schedule
// are set).
func ScanTargets(rows pgx.Rows) (map[int]*ent.PartnerApp, map[int][]*ent.WebhookEndpoint, error) {
	defer rows.Close()
	apps := make(map[int]*ent.PartnerApp)
	eps := make(map[int][]*ent.WebhookEndpoint)
	for rows.Next() {
		var (
			app             int64
			id              *int64
			url, types, sch *string
			enabled         *bool
			autoDisabledAt  *time.Time
		)
		if err := rows.Scan(&app, &id, &url, &types, &enabled, &autoDisabledAt, &sch); err != nil {
			return nil, nil, err
		}
		if apps[int(app)] == nil {
			apps[int(app)] = &ent.PartnerApp{ID: int(app)}
		}
		if id == nil {
			continue
		}
		ep := &ent.WebhookEndpoint{ID: int(*id), AppID: int(app), AutoDisabledAt: autoDisabledAt}
		if url != nil {
			ep.URL = *url
		}
		if enabled != nil {
			ep.Enabled = *enabled
		}
		if err := unmarshalJSON(types, &ep.EventTypes); err != nil {
			return nil, nil, fmt.Errorf("endpoint %d: event_types: %w", ep.ID, err)
		}
		if err := unmarshalJSON(sch, &ep.RetrySchedule); err != nil {
			return nil, nil, fmt.Errorf("endpoint %d: retry_schedule: %w", ep.ID, err)
		}
		eps[ep.AppID] = append(eps[ep.AppID], ep)
	}
	return apps, eps, rows.Err()
}

// unmarshalJSON reads a JSON column as Ent does: NULL or empty leaves v.
func unmarshalJSON(s *string, v any) error {
	if s == nil || *s == "" {
		return nil
	}
	return json.Unmarshal([]byte(*s), v)
}

// TakenByPostgres reads the rows of keys ($1 apps, $2 keys, pairwise).
var TakenByPostgres = fmt.Sprintf(`SELECT p.%[2]s, p.%[3]s, p.%[4]s, p.%[5]s, p.%[6]s
FROM %[1]s p JOIN unnest($1::bigint[], $2::text[]) AS v (app, k) ON p.%[2]s = v.app AND p.%[3]s = v.k`,
	webhookpublication.Table, webhookpublication.FieldAppID, webhookpublication.FieldIdempotencyKey,
	webhookpublication.FieldEventID, webhookpublication.FieldEventType, webhookpublication.FieldCreateTime)

// TakenByConn is TakenBy on a pgx connection inside the group's
// transaction: one statement of its own, which sees the rows a concurrent
// group committed while the upsert waited for them.
func TakenByConn(ctx context.Context, c *pgx.Conn, keys []Key) (map[int]*ent.WebhookPublication, error) {
	apps, ks := make([]int64, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		apps[i], ks[i] = int64(k.App), k.Key
	}
	rows, err := c.Query(ctx, TakenByPostgres, apps, ks)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []*ent.WebhookPublication
	for rows.Next() {
		var (
			p   ent.WebhookPublication
			app int64
		)
		if err := rows.Scan(&app, &p.IdempotencyKey, &p.EventID, &p.EventType, &p.CreateTime); err != nil {
			return nil, err
		}
		p.AppID = int(app)
		found = append(found, &p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return takenOf(keys, found)
}

// OnConn runs fn on a connection of db's pool as a pgx connection (for
// batches). fn may leave a transaction open when it fails: it is rolled
// back, and a connection that is still not idle afterwards (closed, or
// the rollback failed) is discarded rather than pooled, so that the
// server rolls it back.
func OnConn(ctx context.Context, db *sql.DB, fn func(*pgx.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var fnErr error
	rawErr := conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		fnErr = fn(c)
		if fnErr != nil && !c.IsClosed() && c.PgConn().TxStatus() != 'I' && ctx.Err() == nil {
			_, _ = c.Exec(ctx, "ROLLBACK")
		}
		if c.IsClosed() || c.PgConn().TxStatus() != 'I' {
			return driver.ErrBadConn // closed, not pooled: the server rolls back
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	return rawErr
}

// ReadFirstBatch reads the answers of a group's first batch: BEGIN,
// TargetsPostgres and, with keys, ClaimKeysPostgres; tookAll reports
// whether every key of an existing app was taken by its message.
func ReadFirstBatch(br pgx.BatchResults, keys []Key) (map[int]*ent.PartnerApp, map[int][]*ent.WebhookEndpoint, bool, error) {
	if _, err := br.Exec(); err != nil {
		return nil, nil, false, fmt.Errorf("begin: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, false, err
	}
	apps, epsOf, err := ScanTargets(rows)
	if err != nil {
		return nil, nil, false, err
	}
	if len(keys) == 0 {
		return apps, epsOf, true, nil
	}
	tag, err := br.Exec()
	if err != nil {
		return nil, nil, false, err
	}
	known := 0
	for _, k := range keys {
		if apps[k.App] != nil {
			known++
		}
	}
	return apps, epsOf, tag.RowsAffected() == int64(known), nil
}

// InsertAndCommit sends a group's second batch on c, inside the
// transaction its first batch began: the deliveries creates describe
// (all at now) with the NOTIFY on channel, in one statement (none when
// there are none), and COMMIT. An error leaves the transaction to the
// caller (OnConn rolls it back).
func InsertAndCommit(ctx context.Context, c *pgx.Conn, creates []*ent.WebhookDeliveryCreate, now time.Time, channel string) error {
	b := &pgx.Batch{}
	if len(creates) > 0 {
		b.Queue(InsertDeliveriesPostgres, InsertDeliveriesArgs(creates, now, channel)...)
	}
	b.Queue("COMMIT")
	br := c.SendBatch(ctx, b)
	var err error
	for range b.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if c.PgConn().TxStatus() != 'I' {
		return errors.New("publish: the transaction did not commit")
	}
	return nil
}
