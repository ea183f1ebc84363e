package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookpublication"
	"gatehouse/internal/errs"
	"gatehouse/internal/store"
)

// Limits of Publish.
const (
	// IdempotencyWindow is how long an idempotency key of Publish returns
	// its first message.
	IdempotencyWindow = 24 * time.Hour
	// MaxIdempotencyKeyLen bounds an idempotency key.
	MaxIdempotencyKeyLen = 128
	// MaxPublishedBizData bounds the bizData of a published event.
	MaxPublishedBizData = 256 << 10
)

// Published is a message published to one app: one webhook-id and one body,
// delivered once to each receiver.
type Published struct {
	// ID is the message id: the webhook-id header of its deliveries.
	ID        string
	AppID     int
	EventType string
	BizData   json.RawMessage
	// IdempotencyKey is the key it was published with ("" when none).
	IdempotencyKey string
	CreateTime     time.Time
	// Replayed: an earlier Publish with the same key made this message;
	// this call sent nothing.
	Replayed bool
	// Deliveries are the message's deliveries (none when the app has
	// nowhere to receive it). PublishShared and PublishEvents leave them
	// out and set DeliveryCount instead.
	Deliveries []*ent.WebhookDelivery
	// DeliveryCount is how many deliveries a message published by
	// PublishShared or PublishEvents queued (0 for a repeat).
	DeliveryCount int
}

// Publish sends an event of a custom type (CreateEventType) to app appID on
// behalf of another service: bizData must satisfy the type's schema (else
// a validation error on bizData naming the path of the first offending
// value, see catalogue.SchemaError). The message is queued like a built-in event
// (same outbox, signing, retries, delivery log).
//
// With an idempotency key (1 to 128 printable ASCII characters, no
// spaces), a repeat of the key for the same app within IdempotencyWindow
// returns the first message (Replayed) and queues nothing, whatever its
// arguments; concurrent calls with one key queue one message. The key is
// stored in the database with the message, in the same transaction.
//
// Built-in types are raised by gatehouse itself and cannot be published.
// An unknown app is ErrAppNotFound; an unknown type catalogue.ErrTypeNotFound.
func (s *Service) Publish(ctx context.Context, appID int, eventType string, bizData json.RawMessage, key string) (*Published, error) {
	if err := checkIdempotencyKey(key); err != nil {
		return nil, err
	}
	if len(bizData) > MaxPublishedBizData {
		return nil, errs.Invalid("bizData", "must be at most %d bytes of JSON", MaxPublishedBizData)
	}
	t, err := s.Catalogue.Lookup(ctx, eventType)
	if err != nil {
		return nil, err
	}
	if t.BuiltIn {
		return nil, errs.Invalid("eventType", "%s is raised by gatehouse itself and cannot be published (publish a custom type; sendTestWebhook sends a built-in type's example)", eventType)
	}
	if err := t.Validate(ctx, bizData); err != nil {
		return nil, err
	}
	for range 3 {
		if key != "" {
			m, err := s.published(ctx, appID, key)
			if m != nil || err != nil {
				return m, err
			}
		}
		m, err := s.publish(ctx, appID, eventType, bizData, key)
		if key != "" && ent.IsConstraintError(err) {
			continue // a concurrent call with the key won: return its message
		}
		return m, err
	}
	return nil, &errs.Error{Kind: errs.Conflict, Msg: fmt.Sprintf("idempotency key %q is being used by concurrent calls; retry", key)}
}

// IdempotencyKeyArg reads Publish's optional idempotency key argument:
// absent (nil) is no key; an empty string is refused rather than taken as
// none, since a publisher sending "" most likely meant a key and would
// otherwise get a new message on every retry.
func IdempotencyKeyArg(key *string) (string, error) {
	if key == nil {
		return "", nil
	}
	if *key == "" {
		return "", errs.Invalid("idempotencyKey", "must not be empty; omit it for none")
	}
	return *key, nil
}

func checkIdempotencyKey(key string) error {
	if len(key) > MaxIdempotencyKeyLen {
		return errs.Invalid("idempotencyKey", "must be at most %d characters", MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return errs.Invalid("idempotencyKey", "must be printable ASCII without spaces")
		}
	}
	return nil
}

// publish queues the message and, with a key, records it, in one
// transaction. A key of an earlier message that is past the window is
// taken over.
func (s *Service) publish(ctx context.Context, appID int, eventType string, bizData json.RawMessage, key string) (*Published, error) {
	now := s.now()
	m := &Published{ID: NewEventID(), AppID: appID, EventType: eventType, BizData: bizData, IdempotencyKey: key, CreateTime: now}
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		if ok, err := tx.PartnerApp.Query().Where(partnerapp.ID(appID)).Exist(ctx); err != nil {
			return err
		} else if !ok {
			return ErrAppNotFound
		}
		if key != "" {
			if _, err := tx.WebhookPublication.Delete().Where(
				webhookpublication.AppID(appID), webhookpublication.IdempotencyKey(key),
				webhookpublication.CreateTimeLTE(now.Add(-IdempotencyWindow)),
			).Exec(ctx); err != nil {
				return err
			}
			if err := tx.WebhookPublication.Create().
				SetAppID(appID).
				SetIdempotencyKey(key).
				SetEventID(m.ID).
				SetEventType(eventType).
				SetBizData(string(bizData)).
				SetCreateTime(now).
				Exec(ctx); err != nil {
				return err
			}
		}
		q, err := Fanout(ctx, tx.Client(), Event{ID: m.ID, AppID: appID, Type: eventType, BizData: bizData, At: s.opt.Now()})
		if err != nil {
			return err
		}
		for _, d := range q.Deliveries {
			m.Deliveries = append(m.Deliveries, d.Unwrap())
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrAppNotFound):
		return nil, ErrAppNotFound
	case ent.IsConstraintError(err):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("publish %s for app %d: %w", eventType, appID, err)
	}
	return m, nil
}

// published returns the message published with key for appID within the
// window, or nil.
func (s *Service) published(ctx context.Context, appID int, key string) (*Published, error) {
	p, err := s.client.WebhookPublication.Query().Where(
		webhookpublication.AppID(appID), webhookpublication.IdempotencyKey(key),
		webhookpublication.CreateTimeGT(s.now().Add(-IdempotencyWindow)),
	).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("publish: idempotency key: %w", err)
	}
	ds, err := s.client.WebhookDelivery.Query().Where(webhookdelivery.EventID(p.EventID)).
		Order(ent.Asc(webhookdelivery.FieldID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("publish: deliveries of %s: %w", p.EventID, err)
	}
	return &Published{
		ID: p.EventID, AppID: p.AppID, EventType: p.EventType, BizData: json.RawMessage(p.BizData),
		IdempotencyKey: p.IdempotencyKey, CreateTime: p.CreateTime, Replayed: true, Deliveries: ds,
	}, nil
}

// purgePublications deletes idempotency keys past their window.
func (s *Service) purgePublications(ctx context.Context) (int, error) {
	return s.client.WebhookPublication.Delete().
		Where(webhookpublication.CreateTimeLTE(s.now().Add(-IdempotencyWindow))).Exec(ctx)
}
