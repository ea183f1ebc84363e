// Package publishdb writes a group of publishes on Postgres: the
// idempotency keys, and the deliveries with the NOTIFY that announces
// them, each in one statement over array parameters. It is the publish
// path's storage adapter, as dispatch/adapter is the dispatcher's; SQLite
// takes Ent's multi-row statements instead (in package webhook).
package publishdb

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookpublication"
)

// A group of publishes on Postgres writes its rows with one statement per
// table whatever the group's size: each column is one array parameter,
// unnested into rows. The texts never change, so each is prepared once per
// connection, and nothing is planned per row (a VALUES list of k rows is
// a statement of its own per k, and the read-back of the keys an OR of k
// conditions that Postgres planned and ran key by key: most of a batch's
// time).

// ClaimKeysPostgres records the idempotency keys of a group ($1 app ids,
// $2 keys, $3 event ids, $4 types, $5 bizData; $6 the group's time, $7
// the end of the window before it): a key new to its app, or past its
// window, takes the event's message, and counts as a row affected; a key
// taken within its window by another message is left alone. Rows go in
// the arrays' order, (app, key) sorted by the caller, so that concurrent
// groups wait on each other's keys in one order.
var ClaimKeysPostgres = fmt.Sprintf(`INSERT INTO %[1]s (%[2]s, %[3]s, %[4]s, %[5]s, %[6]s, %[7]s)
SELECT v.app, v.k, v.ev, v.t, v.b, $6::timestamptz
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS v (app, k, ev, t, b, n)
WHERE EXISTS (SELECT 1 FROM %[8]s a WHERE a.%[9]s = v.app)
ORDER BY v.n
ON CONFLICT (%[2]s, %[3]s) DO UPDATE SET %[4]s = excluded.%[4]s, %[5]s = excluded.%[5]s, %[6]s = excluded.%[6]s, %[7]s = excluded.%[7]s
WHERE %[1]s.%[7]s <= $7`,
	webhookpublication.Table, webhookpublication.FieldAppID, webhookpublication.FieldIdempotencyKey,
	webhookpublication.FieldEventID, webhookpublication.FieldEventType, webhookpublication.FieldBizData,
	webhookpublication.FieldCreateTime, partnerapp.Table, partnerapp.FieldID)

// InsertDeliveriesPostgres queues a group's deliveries: one array per
// column ($1-$10), one element per delivery; $11 the group's time
// (next_attempt_at, create_time and update_time alike). In the same
// statement it sends the NOTIFY on channel $12 that wakes the other
// replicas at the commit (one round trip fewer per group).
var InsertDeliveriesPostgres = fmt.Sprintf(`WITH d AS (INSERT INTO %s (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
SELECT v.app, v.ep, v.ev, v.t, v.b, v.url, v.st, 0, 0, v.mr, $11::timestamptz, $11::timestamptz, $11::timestamptz, v.tp, v.ts
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[])
  AS v (app, ep, ev, t, b, url, st, mr, tp, ts))
SELECT pg_notify($12::text, '')`,
	webhookdelivery.Table, webhookdelivery.FieldAppID, webhookdelivery.FieldEndpointID, webhookdelivery.FieldEventID,
	webhookdelivery.FieldEventType, webhookdelivery.FieldBizData, webhookdelivery.FieldCallbackURL, webhookdelivery.FieldStatus,
	webhookdelivery.FieldRetryCount, webhookdelivery.FieldAttemptCount, webhookdelivery.FieldMaxRetry,
	webhookdelivery.FieldNextAttemptAt, webhookdelivery.FieldCreateTime, webhookdelivery.FieldUpdateTime,
	webhookdelivery.FieldTraceparent, webhookdelivery.FieldTracestate)

// Key is one publish's idempotency key and the message it is for.
type Key struct {
	App                     int
	Key, EventID, EventType string
	BizData                 string
}

// ClaimKeysArgs are the parameters of ClaimKeysPostgres for keys (sorted
// by app and key): a key new to its app, or whose row was written at or
// before windowStart, takes its message. A key of an app that does not
// exist is skipped (its event fails alone), so that the statement need
// not wait for the read of the apps: the rows affected are the keys taken.
func ClaimKeysArgs(keys []Key, now, windowStart time.Time) []any {
	n := len(keys)
	apps, ks := make([]int64, n), make([]string, n)
	events, types, data := make([]string, n), make([]string, n), make([]string, n)
	for i, k := range keys {
		apps[i], ks[i] = int64(k.App), k.Key
		events[i], types[i], data[i] = k.EventID, k.EventType, k.BizData
	}
	return []any{apps, ks, events, types, data, now, windowStart}
}

// TakenBy reads keys back in one query and returns, by index into keys,
// the row of each key that holds another message than its own: taken
// already, within its window. A key with no row (taken and purged in
// between) is an error: the group runs anew.
func TakenBy(ctx context.Context, tx *ent.Tx, keys []Key) (map[int]*ent.WebhookPublication, error) {
	var apps []int
	var ks []string
	for _, k := range keys {
		if !slices.Contains(apps, k.App) {
			apps = append(apps, k.App)
		}
		ks = append(ks, k.Key)
	}
	// Apps × keys is a superset of the keys (exact with one app); the
	// rows are matched by (app, key) below.
	rows, err := tx.WebhookPublication.Query().
		Where(webhookpublication.AppIDIn(apps...), webhookpublication.IdempotencyKeyIn(ks...)).
		Select(webhookpublication.FieldAppID, webhookpublication.FieldIdempotencyKey, webhookpublication.FieldEventID,
			webhookpublication.FieldEventType, webhookpublication.FieldCreateTime).All(ctx)
	if err != nil {
		return nil, err
	}
	return takenOf(keys, rows)
}

// takenOf returns, by index into keys, the row of rows (keys' rows, and
// maybe more) of each key that holds another message than its own.
func takenOf(keys []Key, rows []*ent.WebhookPublication) (map[int]*ent.WebhookPublication, error) {
	type appKey struct {
		app int
		key string
	}
	byKey := make(map[appKey]*ent.WebhookPublication, len(rows))
	for _, p := range rows {
		byKey[appKey{p.AppID, p.IdempotencyKey}] = p
	}
	out := make(map[int]*ent.WebhookPublication)
	for i, k := range keys {
		switch p := byKey[appKey{k.App, k.Key}]; {
		case p == nil:
			return nil, fmt.Errorf("idempotency key %q of app %d vanished while being read", k.Key, k.App)
		case p.EventID != k.EventID:
			out[i] = p
		}
	}
	return out, nil
}

// InsertDeliveriesArgs are the parameters of InsertDeliveriesPostgres:
// the deliveries creates describe (all at now) and the channel of the
// NOTIFY that wakes the other replicas at the commit.
func InsertDeliveriesArgs(creates []*ent.WebhookDeliveryCreate, now time.Time, channel string) []any {
	n := len(creates)
	apps, eps, maxRetry := make([]int64, n), make([]int64, n), make([]int64, n)
	events, types, data, urls := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	statuses, tps, tss := make([]string, n), make([]string, n), make([]string, n)
	for i, cr := range creates {
		m := cr.Mutation()
		app, _ := m.AppID()
		ep, _ := m.EndpointID()
		mr, _ := m.MaxRetry()
		st, _ := m.Status()
		apps[i], eps[i], maxRetry[i], statuses[i] = int64(app), int64(ep), int64(mr), string(st)
		events[i], _ = m.EventID()
		types[i], _ = m.EventType()
		data[i], _ = m.BizData()
		urls[i], _ = m.CallbackURL()
		tps[i], _ = m.Traceparent()
		tss[i], _ = m.Tracestate()
	}
	return []any{apps, eps, events, types, data, urls, statuses, maxRetry, tps, tss, now, channel}
}
