package webhook

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

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

	var queued bool
	err := publishdb.OnConn(ctx, s.db.SQL, func(c *pgx.Conn) error {
		var err error
		queued, err = s.publishOnConn(ctx, c, calls, outs, claims, keys, appIDs, now, tc)
		return err
	})
	if err != nil {
		return store.Classify(err)
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
	apps, epsOf, tookAll, err := publishdb.ReadFirstBatch(br, keys)
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
	if err := publishdb.InsertAndCommit(ctx, c, creates, now, dispatch.NotifyChannel); err != nil {
		return false, err
	}
	for call, n := range counts {
		outs[call].res.DeliveryCount = n
	}
	return len(creates) > 0, nil
}
