package httpx

import (
	"context"
	"errors"
	"log/slog"
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

// StatusClientClosed is the status a request's log line, metrics and span
// show when its client went away before the answer (nginx's 499, "client
// closed request"): nothing reached the client, and the dependency calls
// that were cut short say nothing about the dependencies.
const StatusClientClosed = 499

// ClientGone reports whether the request's context ended because the
// client went away (not because of the deadline): nobody reads the answer.
func ClientGone(r *http.Request) bool { return ClientGoneContext(r.Context()) }

// ClientGoneContext is ClientGone for a request's context (a resolver's).
func ClientGoneContext(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrDeadline) && !errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// Abandon ends a request whose client went away (ClientGone): the error
// that its cancelled work returned is logged at debug level (it is no
// failure of the server's, and never an ERROR that pages), and the
// request's line shows StatusClientClosed. what names the front door.
func Abandon(w http.ResponseWriter, r *http.Request, log *slog.Logger, what string, err error) {
	log.DebugContext(r.Context(), what+": request abandoned by the client", "err", err, "request_id", GetRequestID(r.Context()))
	w.WriteHeader(StatusClientClosed)
}

// outcome is the status a request's line, metrics and span report: the
// one written, except that a server error answered to a client that had
// gone away is StatusClientClosed (a front door that did not check
// ClientGone answered it, to nobody).
func outcome(r *http.Request, status int) int {
	if status == 0 {
		status = http.StatusOK
	}
	if status >= 500 && ClientGone(r) {
		return StatusClientClosed
	}
	return status
}
