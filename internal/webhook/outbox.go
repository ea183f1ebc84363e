package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/hook"
	"gatehouse/internal/secret"
)

// Event types.
const (
	// EventOrderPaid is sent when an order moves from CREATED to PAID.
	EventOrderPaid = "order.paid"
)

// NewEventID returns a fresh event id: "msg_" and 22 URL-safe characters
// (128 random bits). It is the webhook-id header, identical on every
// attempt of one event, so receivers can drop duplicates.
func NewEventID() string { return secret.RandomToken("msg_", 16) }

// Enqueue writes the delivery of one event for app appID through c, which
// should be the client of the transaction that makes the business change
// (tx.Client()), so that the change and its webhook commit or roll back
// together. bizData must be JSON; it travels as the message's bizData
// string.
//
// The delivery goes to the app's callback URL as it is now (the row keeps
// a copy). An app without a callback URL gets no delivery: Enqueue returns
// nil and no error, since there is nowhere to send it.
//
// Nothing is sent here: the dispatcher picks the row up once the
// transaction commits (at once in this process, see Service).
func Enqueue(ctx context.Context, c *ent.Client, appID int, eventType string, bizData []byte) (*ent.WebhookDelivery, error) {
	if !json.Valid(bizData) {
		return nil, fmt.Errorf("webhook: bizData of %s is not JSON", eventType)
	}
	app, err := c.PartnerApp.Get(ctx, appID)
	if err != nil {
		return nil, fmt.Errorf("webhook: enqueue %s for app %d: %w", eventType, appID, err)
	}
	if app.CallbackURL == "" {
		return nil, nil
	}
	now := dbTime(time.Now())
	d, err := c.WebhookDelivery.Create().
		SetAppID(appID).
		SetEventID(NewEventID()).
		SetEventType(eventType).
		SetBizData(string(bizData)).
		SetCallbackURL(app.CallbackURL).
		SetStatus(StatusPending).
		SetRetryCount(0).
		SetMaxRetry(MaxRetry).
		SetNextAttemptAt(now).
		SetCreateTime(now).
		SetUpdateTime(now).
		Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("webhook: enqueue %s for app %d: %w", eventType, appID, err)
	}
	return d, nil
}

// wakeOnCreate makes every delivery created through client call notify:
// right after the commit when created in a transaction (the dispatcher
// must not look before the row is visible), at once otherwise.
func wakeOnCreate(client *ent.Client, notify func()) {
	client.WebhookDelivery.Use(func(next ent.Mutator) ent.Mutator {
		return hook.WebhookDeliveryFunc(func(ctx context.Context, m *ent.WebhookDeliveryMutation) (ent.Value, error) {
			v, err := next.Mutate(ctx, m)
			if err != nil || !m.Op().Is(ent.OpCreate) {
				return v, err
			}
			if tx, txErr := m.Tx(); txErr == nil {
				tx.OnCommit(func(next ent.Committer) ent.Committer {
					return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
						if err := next.Commit(ctx, tx); err != nil {
							return err
						}
						notify()
						return nil
					})
				})
			} else {
				notify()
			}
			return v, nil
		})
	})
}

// dbTime is how times the dispatcher compares are written: UTC with
// microseconds, the precision both databases keep, so that a value read
// back equals the value written (the lease doubles as a fencing token).
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
