package httpx

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"gatehouse/internal/errs"
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
			if ri := infoFrom(r.Context()); ri != nil {
				ri.timeout = d // for Logger: how long the request may wait
			}
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

// ClientGoneContext is ClientGone for a request's context (a resolver's):
// its context was cancelled (net/http does so when the connection closes
// or the HTTP/2 stream is reset), and by nothing of ours. A deadline —
// ours (ErrDeadline) or any other — is the server's side: a 503, never a
// 499.
func ClientGoneContext(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && !errors.Is(context.Cause(ctx), ErrDeadline) &&
		!errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

// Abandon ends a request whose client went away (ClientGone): the error
// that its cancelled work returned is logged at debug level (it is no
// failure of the server's, and never an ERROR that pages), and the
// request's line shows StatusClientClosed. what names the front door.
// The dependency the error names is kept for the request's line (see
// NoteAbandoned).
func Abandon(w http.ResponseWriter, r *http.Request, log *slog.Logger, what string, err error) {
	log.DebugContext(r.Context(), what+": request abandoned by the client", "err", err, "request_id", GetRequestID(r.Context()))
	NoteAbandoned(r.Context(), err)
	w.WriteHeader(StatusClientClosed)
}

// NoteAbandoned records, for the request's line, the dependency (an
// errs.Dependency) that err — the error of work cut short because the
// client went away — was waiting on. The first one named is kept.
func NoteAbandoned(ctx context.Context, err error) {
	d := errs.DependencyOf(err)
	if d == "" {
		return
	}
	if ri := infoFrom(ctx); ri != nil {
		ri.waitedOn.CompareAndSwap(nil, &d)
	}
}

// slowAbandonMsg is the WARN line of a request whose client gave up after
// more than half of the request timeout (see slowAbandon).
const slowAbandonMsg = "client gave up waiting: a dependency was slow"

// slowAbandon reports whether a request whose client went away (status
// StatusClientClosed) had waited more than half of the request timeout
// (GATEHOUSE_REQUEST_TIMEOUT) by then. A client's own timeout is often
// shorter than ours: when the database or Redis hangs, every request of
// such clients ends as a 499, none reaches our deadline and its 503, and
// an outage would look like impatient clients. Those requests are logged
// at WARN, naming the dependency waited on when it is known.
func slowAbandon(ri *requestInfo, status int, waited time.Duration) bool {
	return status == StatusClientClosed && ri != nil && ri.timeout > 0 && waited > ri.timeout/2
}

// logSlowAbandon writes the WARN line of a slowAbandon request.
func logSlowAbandon(ctx context.Context, log *slog.Logger, ri *requestInfo, waited time.Duration) {
	on := "unknown"
	if d := ri.waitedOn.Load(); d != nil {
		on = string(*d)
	}
	log.WarnContext(ctx, slowAbandonMsg, "waited_on", on, "waited_ms", waited.Milliseconds(),
		"request_timeout", ri.timeout.String(), "request_id", ri.id)
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
