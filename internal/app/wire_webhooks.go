package app

import (
	"context"

	"gatehouse/internal/order"
	"gatehouse/internal/webhook"
)

// webhookServices are the webhook services, embedded in App.
type webhookServices struct {
	// Webhooks is the outbox dispatcher, the retention job and the admin
	// operations on deliveries (Resend, ResendFailed, Cancel, SendTest).
	// Events are queued by the business services themselves
	// (order.Service.Pay) inside their transactions.
	Webhooks *webhook.Service
}

// wireWebhooks builds the webhook outbox and dispatcher.
func (a *App) wireWebhooks(ctx context.Context) error {
	svc, err := webhook.NewService(a.DB, a.Cfg.MasterKey, a.Log, webhook.Options{
		RetryBase:    a.Cfg.Webhooks.RetryBase,
		AllowPrivate: a.Cfg.Webhooks.AllowPrivate,
		Proxy:        a.Cfg.Webhooks.Proxy,
		LoopbackApps: a.Cfg.WebhookLoopbackApps,
		PerApp:       a.Cfg.Webhooks.PerApp,
		Retention:    a.Cfg.Webhooks.Retention,
		Tracing:      a.Cfg.Tracing,
		// The built-in event types, declared where they are raised.
		EventTypes: order.EventTypes(),
	})
	if err != nil {
		return err
	}
	// Commit hooks: a delivery queued, an app or endpoint changed through
	// the app's Ent client wakes the dispatchers at its commit (this
	// process at once, every replica on Postgres through NOTIFY).
	svc.WakeOnCommit(a.DB.Client)
	// Endpoints disabled automatically are recorded in the audit log.
	svc.SetAudit(a.Audit)
	a.Webhooks = svc
	return nil
}

// startWebhooks starts the dispatcher; Close stops it, letting in-flight
// attempts finish (bounded) and releasing the leases of the rest.
func (a *App) startWebhooks(context.Context) {
	a.Webhooks.Start()
	a.stops = append(a.stops, a.Webhooks.Close)
}
