package guard

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"gatehouse/internal/httpx"
	"gatehouse/internal/telemetry"
)

// rootFieldSpans makes one span per root field of an operation, named by
// the field ("payOrder"): the business transaction's span, whose context
// the webhook outbox keeps. A failed field's code (extensions.code) is
// set on it and on the request's server span.
func rootFieldSpans(tr *telemetry.Tracing) graphql.RootFieldMiddleware {
	tracer := tr.Tracer()
	return func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		fc := graphql.GetRootFieldContext(ctx)
		if fc == nil {
			return next(ctx)
		}
		opType := "query"
		if oc := graphql.GetOperationContext(ctx); oc != nil && oc.Operation != nil {
			opType = string(oc.Operation.Operation)
		}
		ctx, span := tracer.Start(ctx, fc.Field.Name, trace.WithAttributes(
			attribute.String("graphql.operation.type", opType),
			attribute.String("graphql.field.name", fc.Field.Name),
		))
		defer span.End()
		m := next(ctx)
		for _, e := range graphql.GetErrors(ctx) {
			if len(e.Path) == 0 || e.Path[0] != ast.PathName(fc.Field.Alias) {
				continue
			}
			c, _ := e.Extensions["code"].(string)
			if c == "" {
				c = CodeInternal
			}
			span.SetAttributes(httpx.AttrCode.String(c))
			span.SetStatus(codes.Error, c)
			if sp := httpx.SpanOf(ctx); sp != nil {
				sp.SetAttributes(httpx.AttrCode.String(c))
			}
			break
		}
		return m
	}
}
