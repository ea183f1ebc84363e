package graph

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/internal/httpx"
)

// ComplexityLimit bounds the cost of one query (gqlgen's field-count model).
const ComplexityLimit = 1000

// NewHandler returns the GraphQL HTTP handler (GET and POST) for resolver.
func NewHandler(resolver *Resolver, log *slog.Logger) http.Handler {
	srv := handler.New(NewExecutableSchema(Config{Resolvers: resolver}))
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.Use(extension.FixedComplexityLimit(ComplexityLimit))
	srv.SetErrorPresenter(errorPresenter(log))
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		log.ErrorContext(ctx, "graphql panic", "panic", v, "request_id", httpx.GetRequestID(ctx))
		return errors.New("internal error")
	})
	return srv
}

// errorPresenter shows coded errors as they are and hides everything else
// behind "internal error", logging the original with the request id.
func errorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && (gqlErr.Extensions["code"] != nil || gqlErr.Rule != "") {
			return gqlErr
		}
		if errors.As(err, &gqlErr) && gqlErr.Err == nil {
			return gqlErr // parse and validation errors from gqlparser
		}
		log.ErrorContext(ctx, "graphql resolver failed", "err", err, "request_id", httpx.GetRequestID(ctx))
		return &gqlerror.Error{
			Message:    "internal error",
			Path:       graphql.GetPath(ctx),
			Extensions: map[string]any{"code": "INTERNAL"},
		}
	}
}
