package httpx

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ErrDeadline is the cause of a request context ended by [Deadline].
var ErrDeadline = errors.New("request deadline (GATEHOUSE_REQUEST_TIMEOUT) exceeded")

// Deadline bounds each request's work: its context ends after d, or
// earlier when the client goes away (net/http cancels the request's
// context when the connection closes). Database and key-value calls take
// that context, so they are cancelled and any transaction rolled back
// rather than committed for a client that got no answer.
func Deadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeoutCause(r.Context(), d, ErrDeadline)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// ClientGone reports whether the request's context ended because the
// client went away (not because of the deadline): nobody reads the answer.
func ClientGone(r *http.Request) bool {
	ctx := r.Context()
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrDeadline) && !errors.Is(ctx.Err(), context.DeadlineExceeded)
}
