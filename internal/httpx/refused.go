package httpx

import (
	"context"
	"log/slog"
	"net/http"

	"gatehouse/internal/errs"
)

// RefusalRecorder counts the requests refused because a dependency did not
// serve them (depstate.Tracker), so that an outage is logged as a state
// change and a summary a second rather than as a line per request.
type RefusalRecorder interface {
	Refused(dep errs.Dependency, err error)
}

// Refusals makes rec the recorder of DependencyRefused for the requests
// below it. It runs after RequestID.
func Refusals(rec RefusalRecorder) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ri := infoFrom(r.Context()); ri != nil {
				ri.refusals = rec
			}
			next.ServeHTTP(w, r)
		})
	}
}

// DependencyRefused records that the request is being answered 503
// because a dependency did not serve it (err is of kind errs.Unavailable).
// Under Refusals it is counted for the summary line, and the request's own
// line is written at INFO instead of ERROR: during an outage each refused
// request is expected, and the dependency's state change is the ERROR.
// Without a recorder (a handler mounted on its own) err is logged at ERROR
// with what and the request id, as before.
func DependencyRefused(ctx context.Context, log *slog.Logger, what string, err error) {
	ri := infoFrom(ctx)
	if ri != nil && ri.refusals != nil {
		ri.depRefused.Store(true)
		ri.refusals.Refused(errs.DependencyOf(err), err)
		return
	}
	log.ErrorContext(ctx, what+": dependency unavailable", "err", err, "request_id", GetRequestID(ctx))
}

// refusedByDependency reports whether the request was answered 503 for a
// dependency under Refusals (DependencyRefused).
func refusedByDependency(ri *requestInfo, status int) bool {
	return ri != nil && status == http.StatusServiceUnavailable && ri.depRefused.Load()
}
