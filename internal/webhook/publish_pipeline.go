package webhook

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"gatehouse/ent"
	"gatehouse/internal/store"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/publishdb"
)

// publishGroupPG is publishGroup on Postgres: the group's transaction in
// two round trips whatever its size, over pgx batches on one connection
// of the pool:
//
//  1. BEGIN; the apps and their endpoints (one statement); the upsert of
//     the idempotency keys (one statement, which skips the keys of apps
//     that do not exist, so it need not wait for the read);
//  2. the deliveries with the NOTIFY (one statement); COMMIT.
//
// Only when a key was taken already (a repeat) is there a third, the read
// of the keys between them, in a statement of its own, so that it sees
// the rows a concurrent group committed while the upsert waited for them.
// Six round trips before, each costing the database and this process a
// wake-up and a system call or two on either side: on a busy machine most
// of a small group's cost.
func (s *Service) publishGroupPG(ctx context.Context, calls []*pubCall) error {
	now := dbTime(s.now())
	tc := telemetry.Capture(ctx)
	appIDs := make([]int64, 0, len(calls))
	outs := make(map[*pubCall]*groupOutcome, len(calls))
	// Keys: the first call of the group with an (app, key) claims it;
	// later ones repeat it. Whether the app exists is known only once
	// the first batch answers; the upsert skips the keys of one that
	// does not.
	first := make(map[pubKey]*pubCall)
	var claims []*pubCall
	for _, c := range calls {
		if id := int64(c.req.AppID); !slices.Contains(appIDs, id) {
			appIDs = append(appIDs, id)
		}
		o := &groupOutcome{res: &Published{ID: NewEventID(), AppID: c.req.AppID, EventType: c.req.EventType, BizData: c.req.BizData,
			IdempotencyKey: c.req.IdempotencyKey, CreateTime: now}}
		outs[c] = o
		if c.req.IdempotencyKey == "" {
			continue
		}
		k := pubKey{c.req.AppID, c.req.IdempotencyKey}
		if f := first[k]; f != nil {
			o.dup, o.res = f, nil
			continue
		}
		first[k] = c
		claims = append(claims, c)
	}
	sortClaims(claims)
	keys := keysOf(claims, func(c *pubCall) *Published { return outs[c].res })

	conn, err := s.db.SQL.Conn(ctx)
	if err != nil {
		return store.Classify(err)
	}
	defer conn.Close()
	queued := false
	var runErr error
	rawErr := conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		queued, runErr = s.publishOnConn(ctx, c, calls, outs, claims, keys, appIDs, now, tc)
		if runErr != nil && !c.IsClosed() && c.PgConn().TxStatus() != 'I' && ctx.Err() == nil {
			_, _ = c.Exec(ctx, "ROLLBACK")
		}
		if c.IsClosed() || c.PgConn().TxStatus() != 'I' {
			return driver.ErrBadConn // closed, not pooled: the server rolls back
		}
		return nil
	})
	if runErr == nil && rawErr != nil {
		runErr = rawErr
	}
	if runErr != nil {
		return store.Classify(runErr)
	}
	if queued {
		s.Notify() // this process's dispatcher; the NOTIFY told the others
	}
	settleGroup(calls, outs)
	return nil
}

// publishOnConn runs publishGroupPG's transaction on c; it reports
// whether deliveries were queued. On an error the transaction may be left
// open (the caller rolls it back).
func (s *Service) publishOnConn(ctx context.Context, c *pgx.Conn, calls []*pubCall, outs map[*pubCall]*groupOutcome,
	claims []*pubCall, keys []publishdb.Key, appIDs []int64, now time.Time, tc telemetry.Context) (bool, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(publishdb.TargetsPostgres, appIDs)
	if len(keys) > 0 {
		b.Queue(publishdb.ClaimKeysPostgres, publishdb.ClaimKeysArgs(keys, now, now.Add(-IdempotencyWindow))...)
	}
	br := c.SendBatch(ctx, b)
	apps, epsOf, tookAll, err := readFirstBatch(br, keys)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if !tookAll {
		// Some keys of existing apps were taken already: read them (only
		// those of existing apps, which the upsert saw).
		var known []publishdb.Key
		var at []*pubCall
		for i, k := range keys {
			if apps[k.App] != nil {
				known, at = append(known, k), append(at, claims[i])
			}
		}
		taken, err := publishdb.TakenByConn(ctx, c, known)
		if err != nil {
			return false, err
		}
		for i, p := range taken {
			outs[at[i]].res = &Published{ID: p.EventID, AppID: p.AppID, EventType: p.EventType,
				IdempotencyKey: p.IdempotencyKey, CreateTime: p.CreateTime, Replayed: true}
		}
	}
	var creates []*ent.WebhookDeliveryCreate
	counts := make(map[*pubCall]int)
	for _, call := range calls {
		o := outs[call]
		app := apps[call.req.AppID]
		if app == nil {
			o.res, o.dup, o.err = nil, nil, ErrAppNotFound
			continue
		}
		if o.dup != nil || o.res == nil || o.res.Replayed {
			continue
		}
		cr, _, _ := fanoutCreates(s.client, app, epsOf[app.ID],
			Event{AppID: app.ID, Type: call.req.EventType, BizData: call.req.BizData}, o.res.ID, now, tc)
		creates = append(creates, cr...)
		counts[call] = len(cr)
	}
	if err := ctx.Err(); err != nil {
		return false, err // no COMMIT for a caller gone
	}
	b = &pgx.Batch{}
	if len(creates) > 0 {
		b.Queue(publishdb.InsertDeliveriesPostgres, publishdb.InsertDeliveriesArgs(creates, now, dispatch.NotifyChannel)...)
	}
	b.Queue("COMMIT")
	br = c.SendBatch(ctx, b)
	for range b.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if c.PgConn().TxStatus() != 'I' {
		return false, errors.New("publish: the transaction did not commit")
	}
	for call, n := range counts {
		outs[call].res.DeliveryCount = n
	}
	return len(creates) > 0, nil
}

// readFirstBatch reads the answers of publishOnConn's first batch: BEGIN,
// the targets and, with keys, the upsert; tookAll reports whether every
// key of an existing app was taken by its message.
func readFirstBatch(br pgx.BatchResults, keys []publishdb.Key) (map[int]*ent.PartnerApp, map[int][]*ent.WebhookEndpoint, bool, error) {
	if _, err := br.Exec(); err != nil {
		return nil, nil, false, fmt.Errorf("begin: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, false, err
	}
	apps, epsOf, err := publishdb.ScanTargets(rows)
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
