package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/predicate"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/store"
	"gatehouse/internal/webhook/dispatch"
)

// requeue makes a delivery new again: PENDING, retry count 0, due now, no
// lease (which fences out a worker still busy with it), no last error
// (the attempts keep the history).
func requeue(m *ent.WebhookDeliveryMutation, now time.Time) {
	m.SetStatus(dispatch.StatusPending)
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
		requeue(u.Mutation(), s.now())
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
	s.Kick(ctx)
	return out.Unwrap(), nil
}

// ResendFilter selects the FAILED deliveries ResendFailed re-queues; nil
// fields select everything.
type ResendFilter struct {
	AppID      *int
	EndpointID *int
	// Since keeps the deliveries created at or after it (a recovery after
	// an outage: Svix's "recover").
	Since *time.Time
}

// ResendFailed re-queues every FAILED delivery that f selects and that
// still has its endpoint, as Resend does, and returns how many it
// re-queued. An unknown app is ErrNotFound; an unknown endpoint, or one
// of another app than f.AppID, ErrEndpointNotFound.
func (s *Service) ResendFailed(ctx context.Context, f ResendFilter) (int, error) {
	total := 0
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		if f.AppID != nil {
			n, err := tx.PartnerApp.Query().Where(partnerapp.ID(*f.AppID)).Count(ctx)
			if err != nil {
				return err
			}
			if n == 0 {
				return ErrNotFound
			}
		}
		if f.EndpointID != nil {
			ep, err := tx.WebhookEndpoint.Get(ctx, *f.EndpointID)
			if ent.IsNotFound(err) || err == nil && f.AppID != nil && ep.AppID != *f.AppID {
				return ErrEndpointNotFound
			}
			if err != nil {
				return err
			}
		}
		failed := []predicate.WebhookDelivery{webhookdelivery.StatusEQ(dispatch.StatusFailed)}
		if f.Since != nil {
			failed = append(failed, webhookdelivery.CreateTimeGTE(dbTime(*f.Since)))
		}
		q := tx.WebhookEndpoint.Query().Where(webhookendpoint.HasDeliveriesWith(failed...))
		if f.AppID != nil {
			q.Where(webhookendpoint.AppID(*f.AppID))
		}
		if f.EndpointID != nil {
			q.Where(webhookendpoint.ID(*f.EndpointID))
		}
		eps, err := q.Select(webhookendpoint.FieldID, webhookendpoint.FieldURL).All(ctx)
		if err != nil {
			return err
		}
		now := s.now()
		// Per endpoint, so that each delivery takes its endpoint's current
		// URL. Deliveries of deleted endpoints stay FAILED.
		for _, e := range eps {
			u := tx.WebhookDelivery.Update().Where(append([]predicate.WebhookDelivery{webhookdelivery.EndpointID(e.ID)}, failed...)...)
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
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrEndpointNotFound) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("resend failed webhook deliveries: %w", err)
	}
	if total > 0 {
		s.Kick(ctx)
	}
	return total, nil
}
