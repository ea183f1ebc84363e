package app

import (
	"context"
	"net/http"

	"gatehouse/graph"
)

// wireAdmin builds the admin-side services (API keys, users, SKUs).
func (a *App) wireAdmin(ctx context.Context) error { return nil }

// resolver is the root GraphQL resolver with every service it reaches.
func (a *App) resolver() *graph.Resolver {
	return &graph.Resolver{Client: a.DB.Client}
}

// adminGuard is the single place where authentication of the admin
// GraphQL endpoint plugs in.
func (a *App) adminGuard(next http.Handler) http.Handler {
	return next
}
