package guard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/internal/audit"
	"gatehouse/internal/httpx"
	"gatehouse/internal/telemetry"
)

// Options are what the guards need besides the schema.
type Options struct {
	// Audit records every mutation (see mutationGate); nil: none.
	Audit *audit.Service
	// Tracing makes a span per root field (nil: off).
	Tracing *telemetry.Tracing
	Log     *slog.Logger
}

// NewHandler returns the GraphQL HTTP handler (GET and POST) for schema:
// introspection on, operation limits (depth, complexity, page sizes),
// errors mapped to codes, and every mutation through the role rule and
// the audit log (mutationGate). Authentication is the caller's (see
// APIKeyGuard, which puts the key in the request's context).
func NewHandler(schema graphql.ExecutableSchema, o Options) http.Handler {
	log := o.Log
	srv := handler.New(schema)
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	apq := lru.New[string](100)
	srv.Use(extension.AutomaticPersistedQuery{Cache: apq})
	srv.Use(limits{})
	srv.Use(noNUL{})
	srv.AroundFields(wrapResolverErrors)
	srv.AroundFields(webhookWarnings)
	srv.AroundFields(traceResult)
	gate := mutationGate{schema: schema.Schema(), audit: o.Audit}
	srv.AroundRootFields(gate.aroundRootField)
	if o.Tracing.On() {
		srv.AroundRootFields(rootFieldSpans(o.Tracing))
	}
	srv.SetErrorPresenter(errorPresenter(log))
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		log.ErrorContext(ctx, "graphql panic", "panic", v, "request_id", httpx.GetRequestID(ctx))
		return &gqlerror.Error{Message: "internal error", Extensions: map[string]any{"code": CodeInternal}}
	})
	srv.SetParserTokenLimit(MaxTokens)
	refusals := refusalAuditor{gate: gate, apq: apq, log: log}
	return refusals.readBody(refusals.requireTransport(refusals.wrap(boundDocument(refusals.refuseGETMutations(unavailableStatus(srv))))))
}

// bodyBytes is a request body read up front: boundDocument reads the
// document from data, gqlgen from the reader.
type bodyBytes struct {
	*bytes.Reader
	data []byte
}

func (*bodyBytes) Close() error { return nil }

// readBody reads a request body up front (any method but GET and HEAD:
// a PUT is refused with its mutation audited), at most httpx.MaxBodyBytes of it,
// so that a larger one is answered 413 like everywhere else, not as a
// GraphQL error, and audited when what was read mentions a mutation. The
// admin listener leaves the size of /graphql bodies to it (a body declared
// too large is still read up to the bound), so that the refusal comes
// after the API key is known.
func (a refusalAuditor) readBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpx.MaxBodyBytes))
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			httpx.WriteError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "request body must be at most 64 KiB")
			a.tooLarge(r.Context(), b)
			return
		case err != nil:
			httpx.WriteError(w, http.StatusBadRequest, "invalid_request", "could not read the request body")
			return
		}
		r.Body = &bodyBytes{Reader: bytes.NewReader(b), data: b}
		next.ServeHTTP(w, r)
	})
}
