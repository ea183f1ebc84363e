package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/secret"
	"gatehouse/internal/telemetry"
)

// EventTest is the webhook package's own event type: the operator's test
// webhook (sendTestWebhook). Every other type is data: declared by the
// domain that raises it (Options.EventTypes) or by an operator
// (CreateEventType), see catalogue.go.
const EventTest = "webhook.test"

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
	// NoticeNoCallbackURL: the app has no callback URL, nothing was queued.
	NoticeNoCallbackURL = "NO_CALLBACK_URL"
	// NoticeHeld: the delivery is queued but held while the app is
	// disabled or expired; it goes out once the app may receive again.
	NoticeHeld = "WEBHOOK_HELD"
)

// Queued is what Enqueue did with one event.
type Queued struct {
	// Delivery is the queued delivery; nil when nothing was queued.
	Delivery *ent.WebhookDelivery
	// Notice is set when the webhook does not go out at once.
	Notice *Notice
}

// EnqueueEvent writes the delivery of one event for app appID through c,
// which should be the client of the transaction that makes the business
// change (tx.Client()), so that the change and its webhook commit or roll
// back together. bizData must be JSON; it travels as the message's bizData
// string.
//
// The delivery goes to the app's callback URL as it is now (the row keeps
// a copy). An app without a callback URL gets no delivery (there is
// nowhere to send it): the result has no Delivery and a Notice. A disabled
// or expired app's delivery is queued and held (see the dispatcher), with
// a Notice.
//
// The notice is also recorded in ctx's collector, if any (CollectNotices).
//
// The row keeps ctx's W3C trace context (when ctx is traced): the
// attempts' spans are its children, so a trace shows the business
// transaction and every delivery attempt it caused.
//
// Nothing is sent here: the dispatcher picks the row up once the
// transaction commits (at once in this process, and on Postgres in every
// replica through NOTIFY, see Service).
func EnqueueEvent(ctx context.Context, c *ent.Client, appID int, eventType string, bizData []byte) (Queued, error) {
	return EnqueueMessage(ctx, c, NewEventID(), appID, eventType, bizData)
}

// EnqueueMessage is EnqueueEvent for a message whose id (its webhook-id,
// from NewEventID) the caller chose: Publish stores it with the
// idempotency key in the same transaction.
func EnqueueMessage(ctx context.Context, c *ent.Client, eventID string, appID int, eventType string, bizData []byte) (Queued, error) {
	if !json.Valid(bizData) {
		return Queued{}, fmt.Errorf("webhook: bizData of %s is not JSON", eventType)
	}
	app, err := c.PartnerApp.Get(ctx, appID)
	if err != nil {
		return Queued{}, fmt.Errorf("webhook: enqueue %s for app %d: %w", eventType, appID, err)
	}
	if app.CallbackURL == "" {
		q := Queued{Notice: &Notice{NoticeNoCallbackURL, fmt.Sprintf(
			"app %s has no callback URL: no %s webhook was queued (set callbackURL with updatePartnerApp to receive the next ones)",
			app.AppKey, eventType)}}
		report(ctx, q.Notice)
		return q, nil
	}
	now := dbTime(time.Now())
	tc := telemetry.Capture(ctx)
	d, err := c.WebhookDelivery.Create().
		SetAppID(appID).
		SetEventID(eventID).
		SetEventType(eventType).
		SetBizData(string(bizData)).
		SetCallbackURL(app.CallbackURL).
		SetStatus(StatusPending).
		SetRetryCount(0).
		SetMaxRetry(MaxRetry).
		SetNextAttemptAt(now).
		SetCreateTime(now).
		SetUpdateTime(now).
		SetTraceparent(tc.Traceparent).
		SetTracestate(tc.Tracestate).
		Save(ctx)
	if err != nil {
		return Queued{}, fmt.Errorf("webhook: enqueue %s for app %d: %w", eventType, appID, err)
	}
	q := Queued{Delivery: d}
	if why := heldBecause(app, now); why != "" {
		q.Notice = &Notice{NoticeHeld, fmt.Sprintf("app %s %s: its %s webhook is queued and held until it may receive webhooks again", app.AppKey, why, eventType)}
		report(ctx, q.Notice)
	}
	return q, nil
}

// Enqueue is EnqueueEvent for callers that need only the delivery (nil
// when the app has no callback URL).
func Enqueue(ctx context.Context, c *ent.Client, appID int, eventType string, bizData []byte) (*ent.WebhookDelivery, error) {
	q, err := EnqueueEvent(ctx, c, appID, eventType, bizData)
	return q.Delivery, err
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

// dbTime is how times the dispatcher compares are written: UTC with
// microseconds, the precision both databases keep, so that a value read
// back equals the value written (the lease doubles as a fencing token).
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
