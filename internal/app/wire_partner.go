package app

import (
	"context"

	"github.com/go-chi/chi/v5"
)

// wirePartner builds the partner API services (apps, signatures, orders).
func (a *App) wirePartner(ctx context.Context) error { return nil }

// mountPartner mounts the signed partner API under /api/v{n}/.
func (a *App) mountPartner(r chi.Router) {}
