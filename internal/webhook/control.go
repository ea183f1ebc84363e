package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gatehouse/ent"
	"gatehouse/ent/predicate"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/errs"
	"gatehouse/internal/webhook/dispatch"
)

// TestEvent is the bizData of a webhook.test event.
type TestEvent struct {
	AppKey  string `json:"app_key"`
	Message string `json:"message"`
	SentAt  string `json:"sent_at"`
}

// MaxWaitingTests is how many webhook.test deliveries of one app may wait
// (PENDING or RETRYING) at once. A test checks a receiver; a script that
// loops over sendTestWebhook would otherwise queue thousands of them ahead
// of the app's real events (an app's deliveries go out oldest first, at
// most GATEHOUSE_WEBHOOK_PER_APP at a time) and flood the partner.
const MaxWaitingTests = 5

// SendTest queues a webhook.test event for app appID: the operator's way
// to check a partner's receiver end to end (address, signature, reply).
// It goes through the dispatcher like any event (same signing, breaker,
// retries), to every endpoint of the app whatever their filters (one
// message; the first delivery is returned). An unknown app is
// ErrAppNotFound; an app without endpoints, or one that is disabled or
// expired (its deliveries are held), is ErrInvalidState; an app with MaxWaitingTests tests still waiting is a
// Conflict (requests racing each other may each pass the count).
//
// With endpointID (not 0) the test goes to that endpoint of the app only
// (another app's or an unknown endpoint is ErrEndpointNotFound, a
// disabled one ErrInvalidState). With eventType (a type of the catalogue,
// built-in or custom) the event is of that type and its bizData is the
// type's example (a type without one is ErrInvalidState), sent to the
// endpoints subscribed to it; the cap then counts the waiting copies of
// that example.
func (s *Service) SendTest(ctx context.Context, appID, endpointID int, eventType string) (*ent.WebhookDelivery, error) {
	typ, biz := EventTest, []byte(nil)
	if eventType != "" && eventType != EventTest {
		t, err := s.Catalogue.Lookup(ctx, eventType)
		if err != nil {
			return nil, err
		}
		if t.Example == nil {
			return nil, invalidState("event type %s has no example to send (declare a type with an example, or use its schema's \"examples\")", eventType)
		}
		typ, biz = t.Name, t.Example
	}
	app, err := s.client.PartnerApp.Get(ctx, appID)
	if ent.IsNotFound(err) {
		return nil, ErrAppNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("send test webhook: %w", err)
	}
	now := s.opt.Now()
	eps := s.client.WebhookEndpoint.Query().Where(webhookendpoint.AppID(appID))
	if endpointID != 0 {
		ep, err := s.client.WebhookEndpoint.Get(ctx, endpointID)
		switch {
		case ent.IsNotFound(err) || err == nil && ep.AppID != appID:
			return nil, ErrEndpointNotFound
		case err != nil:
			return nil, fmt.Errorf("send test webhook: %w", err)
		case !ep.Enabled:
			return nil, invalidState("webhook endpoint %d is disabled, so its webhooks are held (enableWebhookEndpoint first)", endpointID)
		}
		eps.Where(webhookendpoint.ID(endpointID))
	}
	n, err := eps.Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("send test webhook: %w", err)
	}
	switch why := heldBecause(app, now); {
	case n == 0:
		return nil, invalidState("app %s has no callback URL or webhook endpoint (set callbackURL with updatePartnerApp, or createWebhookEndpoint, first)", app.AppKey)
	case why != "":
		return nil, invalidState("app %s %s, so its webhooks are held (enable it or move its expire date first)", app.AppKey, why)
	}
	same := []predicate.WebhookDelivery{webhookdelivery.AppID(appID),
		webhookdelivery.EventType(typ), webhookdelivery.StatusIn(dispatch.StatusPending, dispatch.StatusRetrying)}
	if biz != nil {
		same = append(same, webhookdelivery.BizData(string(biz)))
	}
	// One test is one message, with a delivery per endpoint: messages count.
	ids, err := s.client.WebhookDelivery.Query().Where(same...).Unique(true).Select(webhookdelivery.FieldEventID).Strings(ctx)
	if err != nil {
		return nil, fmt.Errorf("send test webhook: %w", err)
	}
	waiting := len(ids)
	if waiting >= MaxWaitingTests {
		return nil, &errs.Error{Kind: errs.Conflict, Msg: fmt.Sprintf(
			"app %s already has %d test webhooks waiting to be delivered; wait for them (or cancel them with cancelWebhookDelivery) before sending another",
			app.AppKey, waiting)}
	}
	if biz == nil {
		if biz, err = json.Marshal(TestEvent{
			AppKey:  app.AppKey,
			Message: "Test webhook from gatehouse: if you can read this, your endpoint receives and can verify our deliveries.",
			SentAt:  now.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		}); err != nil {
			return nil, err
		}
	}
	q, err := Fanout(ctx, s.client, Event{AppID: appID, Type: typ, BizData: biz, EndpointID: endpointID, AllEndpoints: typ == EventTest, At: s.opt.Now()})
	if errors.Is(err, ErrEndpointNotFound) {
		return nil, ErrEndpointNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("send test webhook: %w", err)
	}
	if q.Delivery == nil { // no endpoint subscribed to the type, or they were deleted meanwhile
		return nil, invalidState("no webhook endpoint of app %s receives %s (their eventTypes filters leave it out)", app.AppKey, typ)
	}
	return q.Delivery, nil
}

// Cancel makes a PENDING or RETRYING delivery CANCELLED: it is never
// attempted again (unless an operator resends it). Its lease is cleared,
// so an attempt already in flight is still recorded when it ends but no
// longer moves the delivery. Any other status is ErrInvalidState; an
// unknown id ErrNotFound.
func (s *Service) Cancel(ctx context.Context, id int) (*ent.WebhookDelivery, error) {
	now := dbTime(s.opt.Now())
	n, err := s.client.WebhookDelivery.Update().
		Where(webhookdelivery.ID(id), webhookdelivery.StatusIn(dispatch.StatusPending, dispatch.StatusRetrying)).
		SetStatus(dispatch.StatusCancelled).
		ClearLeaseUntil().
		SetUpdateTime(now).
		Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("cancel webhook delivery %d: %w", id, err)
	}
	d, err := s.client.WebhookDelivery.Get(ctx, id)
	switch {
	case ent.IsNotFound(err):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("cancel webhook delivery %d: %w", id, err)
	case n == 0:
		return nil, invalidState("delivery %d is %s; only PENDING or RETRYING deliveries can be cancelled", id, d.Status)
	}
	return d, nil
}
