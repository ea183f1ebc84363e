package graph

import (
	"log/slog"
	"net/http"

	"gatehouse/graph/guard"
)

// NewHandler returns the GraphQL HTTP handler (GET and POST) for
// resolver, behind the guards of graph/guard: introspection on,
// operation limits (depth, complexity, page sizes), errors mapped to
// codes, and every mutation through the role rule and the audit log.
// Authentication is the caller's (see guard.APIKeyGuard, which puts the
// key in the request's context).
func NewHandler(resolver *Resolver, log *slog.Logger) http.Handler {
	schema := NewExecutableSchema(Config{Resolvers: resolver, Schema: servedSchema(NewExecutableSchema(Config{}).Schema())})
	return guard.NewHandler(schema, guard.Options{Audit: resolver.Audit, Tracing: resolver.Tracing, Log: log})
}
