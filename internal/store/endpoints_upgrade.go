package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookdelivery"
)

// createdEndpoints is auto-migrate's description of the change that
// brings webhook endpoints to an embedded database.
const createdEndpoints = "create table webhook_endpoints"

// upgradeToEndpoints is, for the embedded database, the data step of the
// Postgres migration …_webhook_endpoints.sql, run once, when auto-migrate
// has just created the endpoints table: each app's callback URL and
// webhook secrets become its first endpoint; an app without a callback URL
// that still has deliveries gets a disabled endpoint at the URL of its
// latest one (its waiting deliveries are held, not lost); every delivery
// then belongs to its app's endpoint. The one-delivery-per-event index of
// before (auto-migrate drops no index) goes, since an event now has one
// delivery per endpoint.
func (d *DB) upgradeToEndpoints(ctx context.Context, changes []string) error {
	if _, err := d.SQL.ExecContext(ctx, "DROP INDEX IF EXISTS webhook_deliveries_event_id_key"); err != nil {
		return fmt.Errorf("endpoints: %w", err)
	}
	if !slices.Contains(changes, createdEndpoints) {
		return nil
	}
	return WithTx(ctx, d.Client, func(tx *ent.Tx) error {
		apps, err := tx.PartnerApp.Query().Order(ent.Asc(partnerapp.FieldID)).All(ctx)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		for _, a := range apps {
			c := tx.WebhookEndpoint.Create().SetAppID(a.ID).SetCreateTime(now).SetUpdateTime(now).SetSecret([]byte("-"))
			if a.WebhookSecret != nil && len(*a.WebhookSecret) > 0 {
				c.SetSecret(*a.WebhookSecret)
			}
			if a.CallbackURL != "" {
				c.SetURL(a.CallbackURL).SetEnabled(true)
				if a.PreviousWebhookSecret != nil && a.PreviousWebhookSecretExpiresAt != nil {
					c.SetPreviousSecret(*a.PreviousWebhookSecret).SetPreviousSecretExpiresAt(*a.PreviousWebhookSecretExpiresAt)
				}
			} else {
				last, err := tx.WebhookDelivery.Query().Where(webhookdelivery.AppID(a.ID)).
					Order(ent.Desc(webhookdelivery.FieldID)).First(ctx)
				if ent.IsNotFound(err) {
					continue
				}
				if err != nil {
					return err
				}
				c.SetURL(last.CallbackURL).SetEnabled(false).
					SetDescription("made from the deliveries of an app without callback URL when endpoints arrived")
			}
			ep, err := c.Save(ctx)
			if err != nil {
				return fmt.Errorf("endpoint of app %d: %w", a.ID, err)
			}
			if err := tx.WebhookDelivery.Update().
				Where(webhookdelivery.AppID(a.ID), webhookdelivery.EndpointIDIsNil()).
				SetEndpointID(ep.ID).Exec(ctx); err != nil {
				return fmt.Errorf("deliveries of app %d: %w", a.ID, err)
			}
		}
		return nil
	})
}
