package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/ent/webhookpublication"
	"gatehouse/internal/errs"
	"gatehouse/internal/store"
	"gatehouse/internal/telemetry"
)

// MaxPublishBatch bounds the events of one PublishEvents call (the REST
// batch route's limit).
const MaxPublishBatch = 500

// maxDeliveriesPerInsert bounds the rows of one INSERT of deliveries:
// each has 14 parameters and Postgres takes at most 65 535 per statement.
const maxDeliveriesPerInsert = 2000

// PublishRequest is one event to publish (see Publish for the rules).
type PublishRequest struct {
	AppID     int
	EventType string
	BizData   json.RawMessage
	// IdempotencyKey is optional ("" for none).
	IdempotencyKey string
}

// PublishResult is the outcome of one event: its message, or why it was
// not published (nothing of it was stored).
type PublishResult struct {
	Message *Published
	Err     error
}

// pubCall is one event on its way to the database, alone or in a group.
type pubCall struct {
	ctx context.Context
	req PublishRequest
	// dup, when set, is the earlier call of the group with the same app
	// and idempotency key: this one answers as its repeat.
	dup *pubCall
	res *Published
	err error
}

// checkPublish checks req without writing anything: the idempotency key,
// the size of bizData, the type (a custom one: built-in types are raised
// by gatehouse itself) and bizData against the type's schema.
func (s *Service) checkPublish(ctx context.Context, req PublishRequest) error {
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return err
	}
	if len(req.BizData) > MaxPublishedBizData {
		return errs.Invalid("bizData", "must be at most %d bytes of JSON", MaxPublishedBizData)
	}
	t, err := s.Catalogue.Lookup(ctx, req.EventType)
	if err != nil {
		return err
	}
	if t.BuiltIn {
		return errs.Invalid("eventType", "%s is raised by gatehouse itself and cannot be published (publish a custom type; sendTestWebhook sends a built-in type's example)", req.EventType)
	}
	return t.Validate(ctx, req.BizData)
}

// PublishShared is Publish for a service's single event (POST
// /api/events): the event is checked alone, then written together with
// the events published concurrently in this process — one transaction,
// shared statements and one commit for the group (see publishGroup), the
// way deductions are batched. An event that finds no group running is
// written at once, alone. The message has no Deliveries rows; its
// delivery count is in DeliveryCount.
func (s *Service) PublishShared(ctx context.Context, req PublishRequest) (*Published, error) {
	if err := s.checkPublish(ctx, req); err != nil {
		return nil, err
	}
	c := &pubCall{ctx: ctx, req: req}
	s.pub.Do(c)
	return c.res, c.err
}

// PublishEvents publishes a batch of events (POST /api/events/batch): each
// is checked on its own, and one that fails its check gets its error
// without stopping the others; the valid ones are written together in one
// transaction. Results are in the order of reqs. At most MaxPublishBatch.
func (s *Service) PublishEvents(ctx context.Context, reqs []PublishRequest) ([]PublishResult, error) {
	if len(reqs) > MaxPublishBatch {
		return nil, errs.Invalid("events", "at most %d events per batch, not %d", MaxPublishBatch, len(reqs))
	}
	out := make([]PublishResult, len(reqs))
	var calls []*pubCall
	idx := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if err := s.checkPublish(ctx, r); err != nil {
			out[i].Err = err
			continue
		}
		calls = append(calls, &pubCall{ctx: ctx, req: r})
		idx = append(idx, i)
	}
	if len(calls) > 0 {
		s.runPublishGroup(ctx, calls)
	}
	for j, c := range calls {
		out[idx[j]] = PublishResult{Message: c.res, Err: c.err}
	}
	return out, nil
}

// runPublishGroup writes calls as one group; when the group fails for a
// reason that is not a dependency's, each call is written again alone, so
// that one event's problem stays its own.
func (s *Service) runPublishGroup(ctx context.Context, calls []*pubCall) {
	err := s.publishGroup(ctx, calls)
	if err == nil {
		return
	}
	if len(calls) == 1 || unavailableErr(ctx, err) != nil {
		setAll(calls, publishFailure(ctx, err))
		return
	}
	for _, c := range calls {
		c.dup, c.res, c.err = nil, nil, nil
		if err := s.publishGroup(ctx, []*pubCall{c}); err != nil {
			c.err = publishFailure(ctx, err)
		}
	}
}

func setAll(calls []*pubCall, err error) {
	for _, c := range calls {
		c.res, c.err = nil, err
	}
}

// unavailableErr returns err as a dependency failure (errs.Unavailable)
// when it is one: the database did not answer, or the work ran out of time.
func unavailableErr(ctx context.Context, err error) error {
	if store.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return fmt.Errorf("%w: publish: %w", errs.Unavailable, err)
	}
	return nil
}

func publishFailure(ctx context.Context, err error) error {
	if u := unavailableErr(ctx, err); u != nil {
		return u
	}
	return fmt.Errorf("publish: %w", err)
}

// publishGroup writes checked events in one transaction with a fixed
// number of statements whatever their number: on SQLite the apps and
// their endpoints (two reads), the idempotency keys (one upsert, and one
// read of the keys when some were taken already) and the deliveries (one
// INSERT per maxDeliveriesPerInsert rows); on Postgres the same in two
// round trips (publishGroupPG). Each call gets its message or its own
// error (an unknown app); an error returned is the group's (nothing was
// written).
func (s *Service) publishGroup(ctx context.Context, calls []*pubCall) error {
	if s.db.Dialect == dialect.Postgres {
		return s.publishGroupPG(ctx, calls)
	}
	now := dbTime(s.now())
	tc := telemetry.Capture(ctx)
	appIDs := make([]int, 0, len(calls))
	for _, c := range calls {
		if !slices.Contains(appIDs, c.req.AppID) {
			appIDs = append(appIDs, c.req.AppID)
		}
	}
	outs := make(map[*pubCall]*groupOutcome, len(calls))
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		clear(outs)
		byID, epsOf, err := groupTargets(ctx, tx, appIDs)
		if err != nil {
			return err
		}
		// Keys: the first call of the group with an (app, key) claims it;
		// later ones repeat it.
		first := make(map[pubKey]*pubCall)
		var claims []*pubCall
		for _, c := range calls {
			o := &groupOutcome{}
			outs[c] = o
			if byID[c.req.AppID] == nil {
				o.err = ErrAppNotFound
				continue
			}
			o.res = &Published{ID: NewEventID(), AppID: c.req.AppID, EventType: c.req.EventType, BizData: c.req.BizData,
				IdempotencyKey: c.req.IdempotencyKey, CreateTime: now}
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
		taken, err := s.claimKeysOf(ctx, tx, claims, func(c *pubCall) *Published { return outs[c].res }, now)
		if err != nil {
			return err
		}
		for c, m := range taken {
			outs[c].res = m
		}
		var creates []*ent.WebhookDeliveryCreate
		counts := make(map[*pubCall]int)
		for _, c := range calls {
			o := outs[c]
			if o.err != nil || o.dup != nil || o.res == nil || o.res.Replayed {
				continue
			}
			app := byID[c.req.AppID]
			cr, _, _ := fanoutCreates(tx.Client(), app, epsOf[app.ID],
				Event{AppID: app.ID, Type: c.req.EventType, BizData: c.req.BizData}, o.res.ID, now, tc)
			creates = append(creates, cr...)
			counts[c] = len(cr)
		}
		if err := s.insertDeliveries(ctx, tx, creates); err != nil {
			return err
		}
		for c, n := range counts {
			outs[c].res.DeliveryCount = n
		}
		return nil
	})
	if err != nil {
		return err
	}
	settleGroup(calls, outs)
	return nil
}

// groupOutcome is a call's outcome while its group's transaction runs
// (set on the call once it committed).
type groupOutcome struct {
	res *Published
	err error
	dup *pubCall
}

// groupTargets reads the apps appIDs and their endpoints (in id order),
// by app.
func groupTargets(ctx context.Context, tx *ent.Tx, appIDs []int) (map[int]*ent.PartnerApp, map[int][]*ent.WebhookEndpoint, error) {
	apps, err := tx.PartnerApp.Query().Where(partnerapp.IDIn(appIDs...)).All(ctx)
	if err != nil {
		return nil, nil, err
	}
	byID := make(map[int]*ent.PartnerApp, len(apps))
	for _, a := range apps {
		byID[a.ID] = a
	}
	eps, err := tx.WebhookEndpoint.Query().Where(webhookendpoint.AppIDIn(appIDs...)).
		Order(ent.Asc(webhookendpoint.FieldID)).All(ctx)
	if err != nil {
		return nil, nil, err
	}
	epsOf := make(map[int][]*ent.WebhookEndpoint, len(apps))
	for _, ep := range eps {
		epsOf[ep.AppID] = append(epsOf[ep.AppID], ep)
	}
	return byID, epsOf, nil
}

// settleGroup gives each call of a committed group its outcome; a repeat
// of an earlier call of the group answers that call's message.
func settleGroup(calls []*pubCall, outs map[*pubCall]*groupOutcome) {
	for _, c := range calls {
		o := outs[c]
		c.res, c.err = o.res, o.err
		if o.dup != nil {
			c.dup = o.dup
		}
	}
	for _, c := range calls {
		if c.dup != nil {
			if m := c.dup.res; m != nil {
				again := *m
				again.Replayed, again.DeliveryCount = true, 0 // a repeat queues nothing
				c.res = &again
			}
		}
	}
}

// claimKeysOf is claimKeys, when there are claims.
func (s *Service) claimKeysOf(ctx context.Context, tx *ent.Tx, claims []*pubCall, msg func(*pubCall) *Published, now time.Time) (map[*pubCall]*Published, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	return s.claimKeys(ctx, tx, claims, msg, now)
}

// insertDeliveries queues the deliveries creates describe on SQLite, in
// multi-row INSERTs of at most maxDeliveriesPerInsert rows, whose hook
// announces the work.
func (s *Service) insertDeliveries(ctx context.Context, tx *ent.Tx, creates []*ent.WebhookDeliveryCreate) error {
	if len(creates) == 0 {
		return nil
	}
	for chunk := range slices.Chunk(creates, maxDeliveriesPerInsert) {
		if err := tx.WebhookDelivery.CreateBulk(chunk...).Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// sortClaims puts claims in (app, key) order.
func sortClaims(claims []*pubCall) {
	slices.SortFunc(claims, func(a, b *pubCall) int {
		return cmp.Or(cmp.Compare(a.req.AppID, b.req.AppID), cmp.Compare(a.req.IdempotencyKey, b.req.IdempotencyKey))
	})
}

// claimKeys records the idempotency keys of claims (each an event with a
// key, no two alike) in one upsert (a multi-row VALUES) and reads them
// back in one query (takenKeys): a key new to its app, or past its
// window, is taken by the event (its message from msg); a key taken
// within the window is left alone and its message returned (Replayed) in
// the result, by call. Rows go in (app, key) order, so that concurrent
// groups wait on each other's keys in one order (no deadlock).
func (s *Service) claimKeys(ctx context.Context, tx *ent.Tx, claims []*pubCall, msg func(*pubCall) *Published, now time.Time) (map[*pubCall]*Published, error) {
	sortClaims(claims)
	creates := make([]*ent.WebhookPublicationCreate, len(claims))
	for i, c := range claims {
		creates[i] = tx.WebhookPublication.Create().SetAppID(c.req.AppID).SetIdempotencyKey(c.req.IdempotencyKey).
			SetEventID(msg(c).ID).SetEventType(c.req.EventType).SetBizData(string(c.req.BizData)).SetCreateTime(now)
	}
	col := entsql.Dialect(s.db.Dialect).Table(webhookpublication.Table).C(webhookpublication.FieldCreateTime)
	if err := tx.WebhookPublication.CreateBulk(creates...).OnConflict(
		entsql.ConflictColumns(webhookpublication.FieldAppID, webhookpublication.FieldIdempotencyKey),
		entsql.ResolveWithNewValues(),
		// Only a key past its window is taken over.
		entsql.UpdateWhere(entsql.LTE(col, now.Add(-IdempotencyWindow))),
	).Exec(ctx); err != nil {
		return nil, err
	}
	return takenKeys(ctx, tx, claims, msg)
}
