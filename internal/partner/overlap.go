package partner

import (
	"context"
	"fmt"

	"gatehouse/ent"
	"gatehouse/internal/store"
	"gatehouse/internal/webhook"
)

// EndSecretOverlap ends the rotation overlap of app id now: the previous
// app secret stops verifying signed requests and the previous webhook
// secret stops signing deliveries (for a secret that leaked, rather than
// waiting out the 24 h). The current secrets are untouched. This replica
// drops its cached copy at once; the others reload within DefaultCacheTTL
// (the webhook sender's copy is as fresh). An app without an overlap is
// returned unchanged.
func (s *Service) EndSecretOverlap(ctx context.Context, id int) (App, error) {
	var row *ent.PartnerApp
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		var err error
		row, err = tx.PartnerApp.UpdateOneID(id).
			ClearPreviousSecret().ClearPreviousSecretExpiresAt().
			ClearPreviousWebhookSecret().ClearPreviousWebhookSecretExpiresAt().
			SetUpdateTime(s.now()).
			Save(ctx)
		if err != nil {
			return err
		}
		// The previous webhook secret is the first endpoint's too.
		return webhook.SyncFirstEndpointSecret(ctx, tx.Client(), id)
	})
	if ent.IsNotFound(err) {
		return App{}, ErrNotFound
	}
	if err != nil {
		return App{}, fmt.Errorf("end the secret overlap of app %d: %w", id, err)
	}
	s.cache.forget(row.AppKey)
	return fromEnt(row), nil
}
