package webhook

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gatehouse/ent"
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

// claimKeysPostgres records the idempotency keys of a group ($1 app ids,
// $2 keys, $3 event ids, $4 types, $5 bizData; $6 the group's time, $7
// the end of the window before it): a key new to its app, or past its
// window, takes the event's message, and counts as a row affected; a key
// taken within its window by another message is left alone. Rows go in
// the arrays' order, (app, key) sorted by the caller, so that concurrent
// groups wait on each other's keys in one order.
var claimKeysPostgres = fmt.Sprintf(`INSERT INTO %[1]s (%[2]s, %[3]s, %[4]s, %[5]s, %[6]s, %[7]s)
SELECT v.app, v.k, v.ev, v.t, v.b, $6::timestamptz
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS v (app, k, ev, t, b, n)
ORDER BY v.n
ON CONFLICT (%[2]s, %[3]s) DO UPDATE SET %[4]s = excluded.%[4]s, %[5]s = excluded.%[5]s, %[6]s = excluded.%[6]s, %[7]s = excluded.%[7]s
WHERE %[1]s.%[7]s <= $7`,
	webhookpublication.Table, webhookpublication.FieldAppID, webhookpublication.FieldIdempotencyKey,
	webhookpublication.FieldEventID, webhookpublication.FieldEventType, webhookpublication.FieldBizData,
	webhookpublication.FieldCreateTime)

// insertDeliveriesPostgres queues a group's deliveries: one array per
// column ($1-$10), one element per delivery; $11 the group's time
// (next_attempt_at, create_time and update_time alike). In the same
// statement it sends the NOTIFY on channel $12 that wakes the other
// replicas at the commit (one round trip fewer per group).
var insertDeliveriesPostgres = fmt.Sprintf(`WITH d AS (INSERT INTO %s (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
SELECT v.app, v.ep, v.ev, v.t, v.b, v.url, v.st, 0, 0, v.mr, $11::timestamptz, $11::timestamptz, $11::timestamptz, v.tp, v.ts
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[])
  AS v (app, ep, ev, t, b, url, st, mr, tp, ts))
SELECT pg_notify($12::text, '')`,
	webhookdelivery.Table, webhookdelivery.FieldAppID, webhookdelivery.FieldEndpointID, webhookdelivery.FieldEventID,
	webhookdelivery.FieldEventType, webhookdelivery.FieldBizData, webhookdelivery.FieldCallbackURL, webhookdelivery.FieldStatus,
	webhookdelivery.FieldRetryCount, webhookdelivery.FieldAttemptCount, webhookdelivery.FieldMaxRetry,
	webhookdelivery.FieldNextAttemptAt, webhookdelivery.FieldCreateTime, webhookdelivery.FieldUpdateTime,
	webhookdelivery.FieldTraceparent, webhookdelivery.FieldTracestate)

// claimKeysPG is claimKeys on Postgres: one upsert of every key; when
// it did not take them all (a repeat of an earlier message), one read of
// the keys, in a statement of its own, which sees the rows a concurrent
// group committed while the upsert waited for them. claims are sorted by
// (app, key).
func claimKeysPG(ctx context.Context, tx *ent.Tx, claims []*pubCall, msg func(*pubCall) *Published, now time.Time) (map[*pubCall]*Published, error) {
	n := len(claims)
	apps, keys := make([]int64, n), make([]string, n)
	events, types, data := make([]string, n), make([]string, n), make([]string, n)
	for i, c := range claims {
		apps[i], keys[i] = int64(c.req.AppID), c.req.IdempotencyKey
		events[i], types[i], data[i] = msg(c).ID, c.req.EventType, string(c.req.BizData)
	}
	res, err := tx.ExecContext(ctx, claimKeysPostgres, apps, keys, events, types, data, now, now.Add(-IdempotencyWindow))
	if err != nil {
		return nil, err
	}
	if took, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if took == int64(n) {
		return nil, nil
	}
	return takenKeys(ctx, tx, claims, msg)
}

// pubKey is an idempotency key of an app.
type pubKey struct {
	app int
	key string
}

// takenKeys reads the keys of claims back: a key whose row holds another
// message than the claim's was taken already (within its window), and
// that message answers the claim as a repeat.
func takenKeys(ctx context.Context, tx *ent.Tx, claims []*pubCall, msg func(*pubCall) *Published) (map[*pubCall]*Published, error) {
	var apps []int
	var keys []string
	for _, c := range claims {
		if !slices.Contains(apps, c.req.AppID) {
			apps = append(apps, c.req.AppID)
		}
		keys = append(keys, c.req.IdempotencyKey)
	}
	// Apps × keys is a superset of the claims (exact with one app);
	// the rows are matched by (app, key) below.
	rows, err := tx.WebhookPublication.Query().
		Where(webhookpublication.AppIDIn(apps...), webhookpublication.IdempotencyKeyIn(keys...)).
		Select(webhookpublication.FieldAppID, webhookpublication.FieldIdempotencyKey, webhookpublication.FieldEventID,
			webhookpublication.FieldEventType, webhookpublication.FieldCreateTime).All(ctx)
	if err != nil {
		return nil, err
	}
	byKey := make(map[pubKey]*ent.WebhookPublication, len(rows))
	for _, p := range rows {
		byKey[pubKey{p.AppID, p.IdempotencyKey}] = p
	}
	out := make(map[*pubCall]*Published)
	for _, c := range claims {
		p := byKey[pubKey{c.req.AppID, c.req.IdempotencyKey}]
		if p != nil && p.EventID == msg(c).ID {
			continue // taken by this event
		}
		if p == nil {
			// Taken and gone again (a concurrent purge): the group runs anew.
			return nil, fmt.Errorf("idempotency key %q of app %d vanished while being read", c.req.IdempotencyKey, c.req.AppID)
		}
		// The first message's bizData is not read back (not answered).
		out[c] = &Published{ID: p.EventID, AppID: p.AppID, EventType: p.EventType,
			IdempotencyKey: p.IdempotencyKey, CreateTime: p.CreateTime, Replayed: true}
	}
	return out, nil
}

// insertDeliveriesPG queues the deliveries creates describe (built by
// fanoutCreates, all at now) and announces them, in one statement.
func insertDeliveriesPG(ctx context.Context, tx *ent.Tx, creates []*ent.WebhookDeliveryCreate, now time.Time) error {
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
	_, err := tx.ExecContext(ctx, insertDeliveriesPostgres, apps, eps, events, types, data, urls, statuses, maxRetry, tps, tss, now, NotifyChannel)
	return err
}
