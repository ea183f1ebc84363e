package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/store"
)

// requeue makes a delivery new again: PENDING, retry count 0, due now, no
// lease (which fences out a worker still busy with it), no last error
// (the attempts keep the history).
func requeue(m *ent.WebhookDeliveryMutation, now time.Time) {
	m.SetStatus(StatusPending)
	m.SetRetryCount(0)
	m.SetNextAttemptAt(now)
	m.ClearLeaseUntil()
	m.ClearLastError()
	m.SetUpdateTime(now)
}

// Resend puts delivery id back in the queue as if new: status PENDING,
// retry count 0, due now, so it gets the full schedule of attempts again.
// Its earlier attempts are kept (new ones continue their numbering). Any
// status may be resent, SUCCESS included (a partner that lost an event).
//
// The delivery goes to its endpoint's current URL (a receiver that was
// fixed by moving it). A delivery whose endpoint was deleted cannot be
// resent (ErrInvalidState). A worker
// still busy with an earlier attempt loses its lease: its attempt is
// recorded but no longer changes the delivery.
func (s *Service) Resend(ctx context.Context, id int) (*ent.WebhookDelivery, error) {
	var out *ent.WebhookDelivery
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		d, err := tx.WebhookDelivery.Query().Where(webhookdelivery.ID(id)).WithEndpoint().Only(ctx)
		if ent.IsNotFound(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if d.Edges.Endpoint == nil {
			return invalidState("delivery %d has no webhook endpoint any more (it was deleted): it cannot be resent", id)
		}
		u := tx.WebhookDelivery.UpdateOneID(id)
		requeue(u.Mutation(), dbTime(time.Now()))
		u.SetCallbackURL(d.Edges.Endpoint.URL)
		out, err = u.Save(ctx)
		return err
	})
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidState) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("resend webhook delivery %d: %w", id, err)
	}
	s.kick(ctx)
	return out.Unwrap(), nil
}

// ResendFailed re-queues every FAILED delivery (of app *appID, or of all
// apps when appID is nil) that still has its endpoint, as Resend does, and returns how many it
// re-queued. An unknown app is ErrNotFound.
func (s *Service) ResendFailed(ctx context.Context, appID *int) (int, error) {
	total := 0
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		if appID != nil {
			n, err := tx.PartnerApp.Query().Where(partnerapp.ID(*appID)).Count(ctx)
			if err != nil {
				return err
			}
			if n == 0 {
				return ErrNotFound
			}
		}
		q := tx.WebhookEndpoint.Query().Where(webhookendpoint.HasDeliveriesWith(webhookdelivery.StatusEQ(StatusFailed)))
		if appID != nil {
			q.Where(webhookendpoint.AppID(*appID))
		}
		eps, err := q.Select(webhookendpoint.FieldID, webhookendpoint.FieldURL).All(ctx)
		if err != nil {
			return err
		}
		now := dbTime(time.Now())
		// Per endpoint, so that each delivery takes its endpoint's current
		// URL. Deliveries of deleted endpoints stay FAILED.
		for _, e := range eps {
			u := tx.WebhookDelivery.Update().Where(
				webhookdelivery.EndpointID(e.ID),
				webhookdelivery.StatusEQ(StatusFailed),
			)
			requeue(u.Mutation(), now)
			u.SetCallbackURL(e.URL)
			n, err := u.Save(ctx)
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("resend failed webhook deliveries: %w", err)
	}
	if total > 0 {
		s.kick(ctx)
	}
	return total, nil
}
