package webhook

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/outbound"
	"gatehouse/internal/webhook/dispatch"
)

// MaxEndpoints is how many webhook endpoints one app may have.
const MaxEndpoints = 10

// FirstEndpoint returns the first endpoint of app appID (lowest id): the
// one the deprecated PartnerApp.callbackURL and webhook secret speak for;
// nil when the app has none.
func FirstEndpoint(ctx context.Context, c *ent.Client, appID int) (*ent.WebhookEndpoint, error) {
	ep, err := c.WebhookEndpoint.Query().Where(webhookendpoint.AppID(appID)).
		Order(ent.Asc(webhookendpoint.FieldID)).First(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	return ep, err
}

// SyncFirstEndpoint makes app appID's first endpoint what the app's
// deprecated webhook fields say, after they were written (createPartnerApp,
// updatePartnerApp(callbackURL), rotateWebhookSecret, endSecretOverlap).
// c should be the client of the transaction that wrote them.
//
//   - A callback URL and no endpoint: the first endpoint is created (every
//     event type, enabled) with the app's webhook secrets.
//   - A callback URL and an endpoint: the first endpoint takes the URL (its
//     waiting deliveries too) and the secrets; a new URL enables it.
//   - No callback URL: the first endpoint is deleted, its waiting
//     deliveries cancelled; the next endpoint, if any, becomes the first
//     and the app's fields speak for it.
func SyncFirstEndpoint(ctx context.Context, c *ent.Client, appID int) error {
	app, err := c.PartnerApp.Get(ctx, appID)
	if err != nil {
		return fmt.Errorf("webhook endpoint of app %d: %w", appID, err)
	}
	first, err := FirstEndpoint(ctx, c, appID)
	if err != nil {
		return fmt.Errorf("webhook endpoint of app %d: %w", appID, err)
	}
	now := dbTime(time.Now())
	switch {
	case app.CallbackURL == "" && first == nil:
		return nil
	case app.CallbackURL == "":
		if err := deleteEndpoint(ctx, c, first.ID, now); err != nil {
			return err
		}
		return mirrorFirstEndpoint(ctx, c, appID)
	case first == nil:
		cr := c.WebhookEndpoint.Create().
			SetAppID(appID).
			SetURL(app.CallbackURL).
			SetSecret(secretOrEmpty(app.WebhookSecret)).
			SetEnabled(true).
			SetCreateTime(now).
			SetUpdateTime(now)
		if app.PreviousWebhookSecret != nil && app.PreviousWebhookSecretExpiresAt != nil {
			cr.SetPreviousSecret(*app.PreviousWebhookSecret).SetPreviousSecretExpiresAt(*app.PreviousWebhookSecretExpiresAt)
		}
		_, err := cr.Save(ctx)
		if err != nil {
			return fmt.Errorf("webhook endpoint of app %d: %w", appID, err)
		}
		return nil
	}
	u := c.WebhookEndpoint.UpdateOneID(first.ID).
		SetURL(app.CallbackURL).
		SetSecret(secretOrEmpty(app.WebhookSecret)).
		SetUpdateTime(now)
	if first.URL != app.CallbackURL {
		u.SetEnabled(true).ClearAutoDisabledAt() // "send there"
	}
	if app.PreviousWebhookSecret != nil && app.PreviousWebhookSecretExpiresAt != nil {
		u.SetPreviousSecret(*app.PreviousWebhookSecret).SetPreviousSecretExpiresAt(*app.PreviousWebhookSecretExpiresAt)
	} else {
		u.ClearPreviousSecret().ClearPreviousSecretExpiresAt()
	}
	if err := u.Exec(ctx); err != nil {
		return fmt.Errorf("webhook endpoint of app %d: %w", appID, err)
	}
	if first.URL != app.CallbackURL {
		return moveWaiting(ctx, c, first.ID, app.CallbackURL, now)
	}
	return nil
}

// SyncFirstEndpointSecret gives app appID's first endpoint (if any) the
// app's webhook secrets, after they were written (rotateWebhookSecret,
// endSecretOverlap); c should be the client of that transaction.
func SyncFirstEndpointSecret(ctx context.Context, c *ent.Client, appID int) error {
	app, err := c.PartnerApp.Get(ctx, appID)
	if err != nil {
		return fmt.Errorf("webhook endpoint of app %d: %w", appID, err)
	}
	first, err := FirstEndpoint(ctx, c, appID)
	if err != nil || first == nil {
		return err
	}
	u := c.WebhookEndpoint.UpdateOneID(first.ID).
		SetSecret(secretOrEmpty(app.WebhookSecret)).
		SetUpdateTime(dbTime(time.Now()))
	if app.PreviousWebhookSecret != nil && app.PreviousWebhookSecretExpiresAt != nil {
		u.SetPreviousSecret(*app.PreviousWebhookSecret).SetPreviousSecretExpiresAt(*app.PreviousWebhookSecretExpiresAt)
	} else {
		u.ClearPreviousSecret().ClearPreviousSecretExpiresAt()
	}
	if err := u.Exec(ctx); err != nil {
		return fmt.Errorf("webhook endpoint of app %d: %w", appID, err)
	}
	return nil
}

// noSecret stands for the secret of an endpoint whose app has none (made
// before webhook secrets, or straight in the database): it unseals to
// nothing, so attempts fail with errNoSecret until the secret is rotated,
// as they did for such an app before endpoints.
var noSecret = []byte("-")

func secretOrEmpty(b *[]byte) []byte {
	if b == nil || len(*b) == 0 {
		return noSecret
	}
	return *b
}

// mirrorFirstEndpoint writes app appID's first endpoint into the app's
// deprecated webhook fields (after an endpoint was created, changed,
// rotated or deleted). Without endpoints the callback URL is cleared and
// the webhook secret kept (the next first endpoint made through
// callbackURL gets it).
func mirrorFirstEndpoint(ctx context.Context, c *ent.Client, appID int) error {
	first, err := FirstEndpoint(ctx, c, appID)
	if err != nil {
		return fmt.Errorf("webhook endpoint of app %d: %w", appID, err)
	}
	u := c.PartnerApp.Update().Where(partnerapp.ID(appID))
	if first == nil {
		u.SetCallbackURL("")
	} else {
		u.SetCallbackURL(first.URL).SetWebhookSecret(first.Secret)
		if first.PreviousSecret != nil && first.PreviousSecretExpiresAt != nil {
			u.SetPreviousWebhookSecret(*first.PreviousSecret).SetPreviousWebhookSecretExpiresAt(*first.PreviousSecretExpiresAt)
		} else {
			u.ClearPreviousWebhookSecret().ClearPreviousWebhookSecretExpiresAt()
		}
	}
	if err := u.Exec(ctx); err != nil {
		return fmt.Errorf("webhook fields of app %d: %w", appID, err)
	}
	return nil
}

// moveWaiting sends the waiting deliveries of endpoint id to its new URL.
func moveWaiting(ctx context.Context, c *ent.Client, id int, url string, now time.Time) error {
	err := c.WebhookDelivery.Update().
		Where(webhookdelivery.EndpointID(id), webhookdelivery.StatusIn(dispatch.StatusPending, dispatch.StatusRetrying)).
		SetCallbackURL(url).SetUpdateTime(now).Exec(ctx)
	if err != nil {
		return fmt.Errorf("waiting deliveries of webhook endpoint %d: %w", id, err)
	}
	return nil
}

// deleteEndpoint cancels the waiting deliveries of endpoint id and deletes
// it; its deliveries stay, without endpoint.
func deleteEndpoint(ctx context.Context, c *ent.Client, id int, now time.Time) error {
	err := c.WebhookDelivery.Update().
		Where(webhookdelivery.EndpointID(id), webhookdelivery.StatusIn(dispatch.StatusPending, dispatch.StatusRetrying)).
		SetStatus(dispatch.StatusCancelled).ClearLeaseUntil().SetUpdateTime(now).
		SetLastError("its webhook endpoint was deleted").Exec(ctx)
	if err != nil {
		return fmt.Errorf("cancel the deliveries of webhook endpoint %d: %w", id, err)
	}
	if err := c.WebhookEndpoint.DeleteOneID(id).Exec(ctx); err != nil {
		return fmt.Errorf("delete webhook endpoint %d: %w", id, err)
	}
	return nil
}

// subscribed reports whether ep receives events of type eventType: its
// filter is empty (every type) or names it.
func subscribed(ep *ent.WebhookEndpoint, eventType string) bool {
	return len(ep.EventTypes) == 0 || slices.Contains(ep.EventTypes, eventType)
}

// BreakerState returns the state of the circuit breaker of app appID's
// first webhook endpoint (the deprecated PartnerApp.webhookBreaker) on
// this replica; an app without endpoints is closed.
func (s *Service) BreakerState(ctx context.Context, appID int, appKey string) (string, error) {
	ep, err := FirstEndpoint(ctx, s.client, appID)
	if err != nil || ep == nil {
		return outbound.StateClosed, err
	}
	return s.EndpointBreakerState(appKey, ep), nil
}
