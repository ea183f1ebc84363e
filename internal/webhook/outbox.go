package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/secret"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/webhook/catalogue"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/dispatch/adapter"
	"gatehouse/internal/webhook/sender"
)

// EventTest is the webhook package's own event type: the operator's test
// webhook (sendTestWebhook), see catalogue.EventTest.
const EventTest = catalogue.EventTest

// EventType is an event type of the catalogue (the GraphQL schema binds
// it here).
type EventType = catalogue.EventType

// NewEventID returns a fresh event id: "msg_" and 22 URL-safe characters
// (128 random bits). It is the webhook-id header, identical on every
// attempt of one event, so receivers can drop duplicates.
func NewEventID() string { return secret.RandomToken("msg_", 16) }

// Notice says why an event's webhook does not go out at once; the admin
// API shows it to the operator as a warning.
type Notice struct {
	// Code is NoticeNoCallbackURL or NoticeHeld.
	Code    string
	Message string
}

// Notice codes.
const (
	// NoticeNoCallbackURL: the app has no webhook endpoint (no callback
	// URL), or every endpoint receiving the event is disabled by an
	// operator: nothing was queued.
	NoticeNoCallbackURL = "NO_CALLBACK_URL"
	// NoticeHeld: the delivery is queued but held while the app is
	// disabled or expired, or its endpoint disabled automatically; it goes
	// out once they may receive again.
	NoticeHeld = "WEBHOOK_HELD"
)

// Queued is what Fanout did with one event.
type Queued struct {
	// Delivery is the first queued delivery (that of the app's first
	// subscribed endpoint); nil when nothing was queued.
	Delivery *ent.WebhookDelivery
	// Deliveries are every delivery of the event: one per subscribed
	// endpoint, in endpoint order, all with one event id (webhook-id).
	Deliveries []*ent.WebhookDelivery
	// Notice is set when the webhook does not go out at once.
	Notice *Notice
}

// Event is one event to fan out to an app's webhook endpoints (Fanout).
type Event struct {
	AppID int
	// Type is the event type (order.paid, …); BizData its JSON payload,
	// sent as the message's bizData string.
	Type    string
	BizData []byte
	// ID is the message id (webhook-id) shared by every delivery of the
	// event; empty: a fresh one (NewEventID).
	ID string
	// EndpointID, when not 0, sends the event to that endpoint of the app
	// only (which must be the app's), whatever its filter.
	EndpointID int
	// AllEndpoints sends it to every endpoint of the app whatever their
	// filters (webhook.test through its appID form).
	AllEndpoints bool
	// At is when the event is queued (its deliveries' create and due
	// time), on the caller's clock: the Service passes its injected
	// clock's time. Zero: the wall clock's now.
	At time.Time
}

// Fanout fans event ev out through c (the business transaction's client):
// one message, one delivery per endpoint of the app subscribed to its type
// (an endpoint with an empty filter receives every type), each with its
// own attempts, schedule and status. Every delivery has the message's id
// and keeps the endpoint's URL as it is now.
//
// An app without endpoints gets no delivery (there is nowhere to send
// it): the result has no Delivery and a Notice. Deliveries of a disabled
// or expired app, and of an endpoint disabled automatically (AutoDisable)
// or addressed by ev.EndpointID while disabled, are queued and held (see
// the dispatcher), with a Notice; an endpoint disabled by an operator
// receives no new event. An app whose endpoints all filter the
// type out gets nothing, without a notice (it asked for that).
//
// The notice is also recorded in ctx's collector, if any (CollectNotices).
//
// Every delivery keeps ctx's W3C trace context (when ctx is traced): the
// attempts' spans are its children, so a trace shows the business
// transaction and every delivery attempt it caused.
//
// Nothing is sent here: the dispatcher picks the rows up once the
// transaction commits (at once in this process, and on Postgres in every
// replica through NOTIFY, see Service).
func Fanout(ctx context.Context, c *ent.Client, ev Event) (Queued, error) {
	eventType := ev.Type
	if !json.Valid(ev.BizData) {
		return Queued{}, fmt.Errorf("webhook: bizData of %s is not JSON", eventType)
	}
	app, err := c.PartnerApp.Get(ctx, ev.AppID)
	if err != nil {
		return Queued{}, fmt.Errorf("webhook: enqueue %s for app %d: %w", eventType, ev.AppID, err)
	}
	q := c.WebhookEndpoint.Query().Where(webhookendpoint.AppID(ev.AppID)).Order(ent.Asc(webhookendpoint.FieldID))
	if ev.EndpointID != 0 {
		q.Where(webhookendpoint.ID(ev.EndpointID))
	}
	eps, err := q.All(ctx)
	if err != nil {
		return Queued{}, fmt.Errorf("webhook: enqueue %s for app %d: %w", eventType, ev.AppID, err)
	}
	if len(eps) == 0 {
		if ev.EndpointID != 0 {
			return Queued{}, fmt.Errorf("webhook: enqueue %s for app %d: %w", eventType, ev.AppID, ErrEndpointNotFound)
		}
		q := Queued{Notice: &Notice{NoticeNoCallbackURL, fmt.Sprintf(
			"app %s has no webhook endpoint: no %s webhook was queued (add one with createWebhookEndpoint, or set callbackURL with updatePartnerApp, to receive the next ones)",
			app.AppKey, eventType)}}
		report(ctx, q.Notice)
		return q, nil
	}
	id := ev.ID
	if id == "" {
		id = NewEventID()
	}
	now := ev.At
	if now.IsZero() {
		now = time.Now()
	}
	now = dbTime(now)
	creates, disabled, off := fanoutCreates(c, app, eps, ev, id, now, telemetry.Capture(ctx))
	if len(creates) == 0 {
		if off == 0 {
			return Queued{}, nil
		}
		q := Queued{Notice: &Notice{NoticeNoCallbackURL, fmt.Sprintf(
			"the %d webhook endpoints of app %s receiving %s are disabled: no %s webhook was queued (enableWebhookEndpoint to receive the next ones)",
			off, app.AppKey, eventType, eventType)}}
		report(ctx, q.Notice)
		return q, nil
	}
	ds, err := c.WebhookDelivery.CreateBulk(creates...).Save(ctx)
	if err != nil {
		return Queued{}, fmt.Errorf("webhook: enqueue %s for app %d: %w", eventType, ev.AppID, err)
	}
	out := Queued{Delivery: ds[0], Deliveries: ds}
	if why := heldBecause(app, now); why != "" {
		out.Notice = &Notice{NoticeHeld, fmt.Sprintf("app %s %s: its %s webhook is queued and held until it may receive webhooks again", app.AppKey, why, eventType)}
	} else if len(disabled) > 0 {
		out.Notice = &Notice{NoticeHeld, fmt.Sprintf("%d of the %d webhook endpoints of app %s receiving %s are disabled (first: endpoint %d): their deliveries are queued and held until they are enabled",
			len(disabled), len(creates), app.AppKey, eventType, disabled[0].ID)}
	}
	if out.Notice != nil {
		report(ctx, out.Notice)
	}
	return out, nil
}

// fanoutCreates builds the deliveries of event ev (message id id) to the
// endpoints eps of app (in endpoint order): one per endpoint subscribed
// to its type, or the one ev.EndpointID names. It returns them with the
// subscribed endpoints that are disabled but receive, held (disabled
// automatically, or addressed alone), and the number of subscribed
// endpoints disabled by hand (skipped).
func fanoutCreates(c *ent.Client, app *ent.PartnerApp, eps []*ent.WebhookEndpoint, ev Event, id string, now time.Time, tc telemetry.Context) (creates []*ent.WebhookDeliveryCreate, disabled []*ent.WebhookEndpoint, off int) {
	for _, ep := range eps {
		if ev.EndpointID == 0 && !ev.AllEndpoints && !subscribed(ep, ev.Type) {
			continue
		}
		if !ep.Enabled {
			// Disabled by hand: not subscribed to anything until enabled
			// (only a delivery addressed to it alone is queued, held).
			// Disabled automatically: its events are held for it.
			if ep.AutoDisabledAt == nil && ev.EndpointID == 0 {
				off++
				continue
			}
			disabled = append(disabled, ep)
		}
		creates = append(creates, c.WebhookDelivery.Create().
			SetAppID(app.ID).
			SetEndpointID(ep.ID).
			SetEventID(id).
			SetEventType(ev.Type).
			SetBizData(string(ev.BizData)).
			SetCallbackURL(ep.URL).
			SetStatus(dispatch.StatusPending).
			SetRetryCount(0).
			SetMaxRetry(sender.MaxRetryOf(ep.RetrySchedule)).
			SetNextAttemptAt(now).
			SetCreateTime(now).
			SetUpdateTime(now).
			SetTraceparent(tc.Traceparent).
			SetTracestate(tc.Tracestate))
	}
	return creates, disabled, off
}

// heldBecause says why app's deliveries are held at now ("" when they are
// not): a disabled app, or one past the end of its expire date (UTC).
func heldBecause(app *ent.PartnerApp, now time.Time) string {
	switch {
	case app.Status != 1:
		return "is disabled"
	case app.ExpireDate != nil && !now.Before(app.ExpireDate.UTC().AddDate(0, 0, 1)):
		return "expired on " + app.ExpireDate.UTC().Format(time.DateOnly)
	}
	return ""
}

// dbTime is how times are stored (see adapter.DBTime).
func dbTime(t time.Time) time.Time { return adapter.DBTime(t) }
