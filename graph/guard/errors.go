package guard

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/graph/scalar"
	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
)

// Error codes in extensions.code.
const (
	CodeValidationFailed = "VALIDATION_FAILED"
	CodeNotFound         = "NOT_FOUND"
	CodeConflict         = "CONFLICT"
	CodeInvalidState     = "INVALID_STATE"
	CodeForbidden        = "FORBIDDEN"
	CodeUnavailable      = "UNAVAILABLE"
	// The outcomes of calls to the payment provider (refundOrder).
	CodePaymentFailed        = "PAYMENT_FAILED"
	CodePaymentNotConfigured = "PAYMENT_NOT_CONFIGURED"
	CodeUpstreamUnavailable  = "UPSTREAM_UNAVAILABLE"
	CodeInternal             = "INTERNAL"
	CodeQueryTooComplex      = "QUERY_TOO_COMPLEX"
	// CodePersistedQueryInvalid: the persistedQuery extension cannot be
	// used (its hash does not match the query sent, an unknown version,
	// data of the wrong shape).
	CodePersistedQueryInvalid = "PERSISTED_QUERY_INVALID"
	// CodeBadRequest: any other refusal of the request itself.
	CodeBadRequest = "BAD_REQUEST"
)

// codeOfRequestError codes an error gqlgen raised about the request's
// parameters without one.
func codeOfRequestError(msg string) string {
	if strings.Contains(msg, "APQ") {
		return CodePersistedQueryInvalid
	}
	return CodeBadRequest
}

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
// field it is about, or the status the payment provider answered, if any).
type codedError struct {
	code, field, msg string
	providerStatus   int
	// path is where in a JSON argument a validation error is (a JSONPath,
	// see catalogue.SchemaError).
	path string
}

// jsonPather is implemented by validation errors that say where in a JSON
// argument the fault is (catalogue.SchemaError: bizData of a published event).
type jsonPather interface{ JSONPath() string }

// providerStatuser is implemented by errors that carry the HTTP status an
// external service answered (see payment.Failure).
type providerStatuser interface{ ProviderStatus() int }

// domainError maps an error's kind to its code: the one place where the
// admin front door translates domain errors. Validation and not-found
// errors show their own text (without the context that wrapped them);
// conflicts and invalid states the whole chain, which says what collided.
func domainError(err error) (codedError, bool) {
	switch errs.KindOf(err) {
	case errs.Validation:
		ce := codedError{code: CodeValidationFailed, field: errs.Field(err), msg: errs.Message(err)}
		var jp jsonPather
		if errors.As(err, &jp) {
			ce.path = jp.JSONPath()
		}
		return ce, true
	case errs.NotFound:
		return codedError{code: CodeNotFound, msg: errs.Message(err)}, true
	case errs.Conflict:
		return codedError{code: CodeConflict, msg: chainText(err)}, true
	case errs.InvalidState:
		return codedError{code: CodeInvalidState, msg: chainText(err)}, true
	case errs.Forbidden:
		return codedError{code: CodeForbidden, msg: errs.Message(err)}, true
	case errs.Unavailable:
		return codedError{code: CodeUnavailable, msg: "a dependency is unavailable, retry later"}, true
	case errs.PaymentFailed:
		ce := codedError{code: CodePaymentFailed, msg: errs.Message(err)}
		var ps providerStatuser
		if errors.As(err, &ps) {
			ce.providerStatus = ps.ProviderStatus()
		}
		return ce, true
	case errs.PaymentNotConfigured:
		return codedError{code: CodePaymentNotConfigured, msg: errs.Message(err)}, true
	case errs.UpstreamUnavailable:
		return codedError{code: CodeUpstreamUnavailable, msg: errs.Message(err)}, true
	}
	return codedError{}, false
}

// chainText is the text of the resolver's own error chain, without the
// position gqlgen puts in front of it ("input:1:12: payOrder …").
func chainText(err error) string {
	var re *resolverError
	if errors.As(err, &re) {
		return re.err.Error()
	}
	return err.Error()
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
			if ce.code == CodeUnavailable {
				if httpx.ClientGoneContext(ctx) {
					// The client hung up: the calls it cut short say
					// nothing about the dependencies (the reply goes out
					// as 499, to nobody).
					log.DebugContext(ctx, "graphql: request abandoned by the client", "err", err, "path", out.Path.String(), "request_id", httpx.GetRequestID(ctx))
					httpx.NoteAbandoned(ctx, err)
				} else {
					httpx.DependencyRefused(ctx, log, "graphql "+out.Path.String(), err)
				}
				markUnavailable(ctx)
			}
			out.Message = ce.msg
			out.Extensions = map[string]any{"code": ce.code}
			if ce.field != "" {
				out.Extensions["field"] = ce.field
			}
			if ce.path != "" {
				out.Extensions["path"] = ce.path
			}
			if ce.providerStatus != 0 {
				out.Extensions["providerStatus"] = ce.providerStatus
			}
			return out
		}
		if gqlErr != nil && gqlErr.Extensions["code"] != nil {
			return gqlErr // raised by our own code with a code already
		}
		var re *resolverError
		if errors.As(err, &re) {
			if httpx.ClientGoneContext(ctx) {
				log.DebugContext(ctx, "graphql: request abandoned by the client", "err", err, "path", out.Path.String(), "request_id", httpx.GetRequestID(ctx))
				httpx.NoteAbandoned(ctx, err)
				markUnavailable(ctx) // 499, see unavailableStatus
			} else {
				log.ErrorContext(ctx, "graphql resolver failed", "err", err, "path", out.Path.String(), "request_id", httpx.GetRequestID(ctx))
			}
			out.Message = "internal error"
			out.Extensions = map[string]any{"code": CodeInternal}
			return out
		}
		// Not from a resolver: a parse or validation error of the request,
		// or an argument value that could not be read (a bad Time, say).
		if gqlErr != nil && gqlErr.Err == nil {
			if gqlErr.Extensions["code"] == nil {
				// gqlgen's own refusals of a request's parameters (a
				// persisted query's hash that does not match its document,
				// an unknown APQ version) come without a code.
				if gqlErr.Extensions == nil {
					gqlErr.Extensions = map[string]any{}
				}
				gqlErr.Extensions["code"] = codeOfRequestError(gqlErr.Message)
			}
			return gqlErr
		}
		var unreadable *scalar.InputError
		if errors.As(err, &unreadable) {
			// An ID, Int64 or Time argument (or input field, or list
			// element) that cannot be read: named by its path among the
			// arguments ("appID", "input.appID", "where.idIn[2]",
			// "since"), also when a variable carried it, never with
			// strconv's or time's text.
			field := argumentPath(ctx, gqlErr, strings.ToLower(unreadable.Scalar))
			out.Message = field + ": " + unreadable.Error()
			out.Extensions = map[string]any{"code": CodeValidationFailed, "field": field}
			return out
		}
		out.Message = err.Error()
		if gqlErr != nil {
			out.Message = gqlErr.Message
		}
		out.Extensions = map[string]any{"code": CodeValidationFailed}
		return out
	}
}

// argumentPath names where among a field's arguments the value of an
// argument error is ("where.idIn[2]"): its path less the path of the field
// the arguments are of (ctx's), which for a nested field holds its parents
// ("partnerApps.edges[0].node.orders"). fallback when there is none.
func argumentPath(ctx context.Context, gqlErr *gqlerror.Error, fallback string) string {
	if gqlErr == nil {
		return fallback
	}
	at := gqlErr.Path
	if fieldPath := graphql.GetPath(ctx); len(fieldPath) > 0 && len(at) > len(fieldPath) &&
		at[:len(fieldPath)].String() == fieldPath.String() {
		at = at[len(fieldPath):]
	} else if len(at) > 1 {
		// No field in ctx: the path starts with the field.
		at = at[1:]
	} else {
		return fallback
	}
	return strings.TrimPrefix(at.String(), ".")
}
