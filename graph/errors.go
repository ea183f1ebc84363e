package graph

import (
	"context"
	"errors"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/internal/apikey"
	"gatehouse/internal/httpx"
	"gatehouse/internal/identity"
	"gatehouse/internal/inventory"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/webhook"
)

// Error codes in extensions.code.
const (
	CodeValidationFailed = "VALIDATION_FAILED"
	CodeNotFound         = "NOT_FOUND"
	CodeConflict         = "CONFLICT"
	CodeInvalidState     = "INVALID_STATE"
	CodeInternal         = "INTERNAL"
	CodeQueryTooComplex  = "QUERY_TOO_COMPLEX"
)

// resolverError marks an error returned by a resolver (see
// wrapResolverErrors), as opposed to one raised while reading the request
// (a bad argument value), so that only resolver errors are hidden behind
// "internal error" when they are not domain errors.
type resolverError struct{ err error }

func (e *resolverError) Error() string { return e.err.Error() }
func (e *resolverError) Unwrap() error { return e.err }

// wrapResolverErrors is field middleware that marks resolver errors.
func wrapResolverErrors(ctx context.Context, next graphql.Resolver) (any, error) {
	res, err := next(ctx)
	if err != nil {
		var re *resolverError
		if !errors.As(err, &re) {
			err = &resolverError{err: err}
		}
	}
	return res, err
}

// codedError is an error the caller may see, with its code (and the input
// field it is about, if any).
type codedError struct {
	code, field, msg string
}

// domainError maps the domain packages' errors to codes: the one place
// where the admin front door translates them.
func domainError(err error) (codedError, bool) {
	var (
		pv *partner.ValidationError
		ov *order.ValidationError
		av *apikey.ValidationError
		iv *identity.ValidationError
		sv *inventory.ValidationError
	)
	switch {
	case errors.As(err, &pv):
		return codedError{CodeValidationFailed, pv.Field, pv.Error()}, true
	case errors.As(err, &ov):
		return codedError{CodeValidationFailed, ov.Field, ov.Error()}, true
	case errors.As(err, &av):
		return codedError{CodeValidationFailed, av.Field, av.Error()}, true
	case errors.As(err, &iv):
		return codedError{CodeValidationFailed, iv.Field, iv.Error()}, true
	case errors.As(err, &sv):
		return codedError{CodeValidationFailed, sv.Field, sv.Error()}, true
	case errors.Is(err, order.ErrInvalidState):
		return codedError{code: CodeInvalidState, msg: err.Error()}, true
	case errors.Is(err, partner.ErrNotFound), errors.Is(err, order.ErrNotFound),
		errors.Is(err, apikey.ErrNotFound), errors.Is(err, inventory.ErrNotFound),
		errors.Is(err, webhook.ErrNotFound):
		return codedError{code: CodeNotFound, msg: notFoundMessage(err)}, true
	case errors.Is(err, partner.ErrConflict), errors.Is(err, order.ErrConflict),
		errors.Is(err, identity.ErrConflict):
		return codedError{code: CodeConflict, msg: err.Error()}, true
	}
	return codedError{}, false
}

func notFoundMessage(err error) string {
	for _, e := range []error{partner.ErrNotFound, order.ErrNotFound, apikey.ErrNotFound, inventory.ErrNotFound, webhook.ErrNotFound} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "not found"
}

// errorPresenter shows domain and request errors with their code, and
// hides every other resolver error behind "internal error", logging the
// original with the request id.
func errorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		out := &gqlerror.Error{Path: graphql.GetPath(ctx)}
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) {
			out.Path, out.Locations, out.Rule = gqlErr.Path, gqlErr.Locations, gqlErr.Rule
		}
		if ce, ok := domainError(err); ok {
			out.Message = ce.msg
			out.Extensions = map[string]any{"code": ce.code}
			if ce.field != "" {
				out.Extensions["field"] = ce.field
			}
			return out
		}
		if gqlErr != nil && gqlErr.Extensions["code"] != nil {
			return gqlErr // raised by our own code with a code already
		}
		var re *resolverError
		if errors.As(err, &re) {
			log.ErrorContext(ctx, "graphql resolver failed", "err", err, "path", out.Path.String(), "request_id", httpx.GetRequestID(ctx))
			out.Message = "internal error"
			out.Extensions = map[string]any{"code": CodeInternal}
			return out
		}
		// Not from a resolver: a parse or validation error of the request,
		// or an argument value that could not be read (a bad Time, say).
		if gqlErr != nil && gqlErr.Err == nil {
			return gqlErr
		}
		out.Message = err.Error()
		if gqlErr != nil {
			out.Message = gqlErr.Message
		}
		out.Extensions = map[string]any{"code": CodeValidationFailed}
		return out
	}
}

// validationError is a VALIDATION_FAILED error raised by the admin layer itself.
func validationError(field, msg string) error {
	return &gqlerror.Error{
		Message:    field + ": " + msg,
		Extensions: map[string]any{"code": CodeValidationFailed, "field": field},
	}
}
