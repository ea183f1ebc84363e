// Package errs is the one vocabulary of errors that the domain packages
// speak and the front doors translate. A domain error has a kind
// (validation, not found, conflict, invalid state, forbidden, unavailable);
// each front door (ticket REST, partner envelope, sign-in JSON, GraphQL)
// maps kinds to its own shape in one switch, so a new domain package needs
// no change to any mapper: it declares its errors with a kind and returns them.
//
// Domain packages declare sentinels with [New] (for errors.Is), report bad
// input with [Invalid] (naming the input field), and mark a dependency that
// did not answer by wrapping the kind itself:
//
//	var ErrNotFound = errs.New(errs.NotFound, "order does not exist")
//	return errs.Invalid("order_no", "must be 1 to %d characters", MaxOrderNoLen)
//	return fmt.Errorf("%w: load app: %w", errs.Unavailable, err)
//
// A front door asks [KindOf] for the kind, [Message] for the text the caller
// may read and [Field] for the input field. Errors of no kind are internal:
// their text is logged, never shown.
package errs

import (
	"errors"
	"fmt"
)

// Kind classifies an error for the front doors. The zero Kind is Internal.
type Kind uint8

// The kinds of error.
const (
	// Internal is an unexpected error: logged, answered as a server error.
	Internal Kind = iota
	// Validation: an input breaks a rule (the caller must change it).
	Validation
	// NotFound: the thing named does not exist.
	NotFound
	// Conflict: the change collides with existing data (a taken name).
	Conflict
	// InvalidState: the thing's current state does not allow the operation.
	InvalidState
	// Forbidden: the thing exists but belongs to someone else.
	Forbidden
	// Unavailable: a dependency (database, key-value store) did not answer;
	// the same request may succeed later.
	Unavailable
	// PaymentFailed: the payment provider did not accept the operation (it
	// refused, failed or did not answer); nothing changed here.
	PaymentFailed
	// PaymentNotConfigured: the operation needs a payment provider and
	// none is configured.
	PaymentNotConfigured
	// UpstreamUnavailable: an external service is not being called at the
	// moment (its circuit breaker is open); the same request may succeed
	// later.
	UpstreamUnavailable
)

var kindText = [...]string{
	Internal:     "internal error",
	Validation:   "validation failed",
	NotFound:     "not found",
	Conflict:     "conflict",
	InvalidState: "invalid state",
	Forbidden:    "forbidden",
	Unavailable:  "dependency unavailable",

	PaymentFailed:        "payment failed",
	PaymentNotConfigured: "payment provider not configured",
	UpstreamUnavailable:  "external service unavailable",
}

// String names the kind.
func (k Kind) String() string {
	if int(k) < len(kindText) {
		return kindText[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Error lets a kind be wrapped on its own, for a failure that has no
// message of its own to show: fmt.Errorf("%w: %w", errs.Unavailable, err).
func (k Kind) Error() string { return k.String() }

func (k Kind) kind() Kind { return k }

// Error is a domain error of a kind, with a message fit for the caller.
type Error struct {
	Kind Kind
	// Field names the input a validation error is about (the query
	// parameter or GraphQL field), or is empty.
	Field string
	// Msg is the text for the caller, without the field.
	Msg string
	// Err is an optional cause, visible to errors.Is and errors.As.
	Err error
}

// Error is "field: msg", or msg alone when there is no field.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, errs.NotFound) hold for every not-found error,
// whatever domain declared it.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

func (e *Error) kind() Kind { return e.Kind }

// New returns an error of kind with message msg (typically a package-level
// sentinel compared with errors.Is).
func New(kind Kind, msg string) *Error { return &Error{Kind: kind, Msg: msg} }

// Invalid returns a validation error about field.
func Invalid(field, format string, args ...any) error {
	return &Error{Kind: Validation, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// kinded is implemented by Kind and *Error: the first of either in err's
// chain decides the kind.
type kinded interface{ kind() Kind }

// KindOf returns the kind of the first kinded error in err's chain, or
// Internal when there is none (or err is nil).
func KindOf(err error) Kind {
	var k kinded
	if errors.As(err, &k) {
		return k.kind()
	}
	return Internal
}

// Message is the text of the first kinded error in err's chain, without
// the context that wrapped it on its way up (which may name internals):
// the *Error's own text, or the kind's name. Empty for an Internal error.
func Message(err error) string {
	var k kinded
	if !errors.As(err, &k) {
		return ""
	}
	return k.(error).Error()
}

// Field is the input field of the first *Error in err's chain, or "".
func Field(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// Dependency names the dependency an Unavailable error is about. The
// storage boundaries wrap it beside the kind
// (fmt.Errorf("%w: %w unavailable: %w", errs.Unavailable, errs.Database, err)),
// so that a request's log line can say what it waited on without
// reading error text.
type Dependency string

// Error is the dependency's name.
func (d Dependency) Error() string { return string(d) }

// The dependencies a request waits on.
const (
	// Database is the SQL database (SQLite or Postgres).
	Database Dependency = "database"
	// KV is the key-value store (Redis, or the in-process one).
	KV Dependency = "kv"
)

// DependencyOf is the first Dependency in err's chain, or "" when err
// names none.
func DependencyOf(err error) Dependency {
	var d Dependency
	if errors.As(err, &d) {
		return d
	}
	return ""
}
