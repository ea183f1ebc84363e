package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookdelivery"
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
// The delivery goes to the app's current callback URL when it has one (a
// receiver that was fixed by moving it), else to the one it had. A worker
// still busy with an earlier attempt loses its lease: its attempt is
// recorded but no longer changes the delivery.
func (s *Service) Resend(ctx context.Context, id int) (*ent.WebhookDelivery, error) {
	var out *ent.WebhookDelivery
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		d, err := tx.WebhookDelivery.Query().Where(webhookdelivery.ID(id)).WithApp().Only(ctx)
		if ent.IsNotFound(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		u := tx.WebhookDelivery.UpdateOneID(id)
		requeue(u.Mutation(), dbTime(time.Now()))
		if url := d.Edges.App.CallbackURL; url != "" {
			u.SetCallbackURL(url)
		}
		out, err = u.Save(ctx)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("resend webhook delivery %d: %w", id, err)
	}
	s.kick(ctx)
	return out.Unwrap(), nil
}

// ResendFailed re-queues every FAILED delivery (of app *appID, or of all
// apps when appID is nil) as Resend does, and returns how many it
// re-queued. An unknown app is ErrNotFound.
func (s *Service) ResendFailed(ctx context.Context, appID *int) (int, error) {
	total := 0
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		q := tx.PartnerApp.Query()
		if appID != nil {
			q.Where(partnerapp.ID(*appID))
		} else {
			q.Where(partnerapp.HasWebhookDeliveriesWith(webhookdelivery.StatusEQ(StatusFailed)))
		}
		apps, err := q.Select(partnerapp.FieldID, partnerapp.FieldCallbackURL).All(ctx)
		if err != nil {
			return err
		}
		if appID != nil && len(apps) == 0 {
			return ErrNotFound
		}
		now := dbTime(time.Now())
		// Per app, so that each delivery takes its app's current callback URL.
		for _, a := range apps {
			u := tx.WebhookDelivery.Update().Where(
				webhookdelivery.AppID(a.ID),
				webhookdelivery.StatusEQ(StatusFailed),
			)
			requeue(u.Mutation(), now)
			if a.CallbackURL != "" {
				u.SetCallbackURL(a.CallbackURL)
			}
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
