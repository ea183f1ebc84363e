package inventory

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"gatehouse/internal/errs"
)

// ErrOutcomeUnknown is the answer to a deduction whose statement reached
// Postgres and whose reply was lost (the connection broke, or the request's
// deadline passed, after it was sent): the database may have committed it
// or not, and this process cannot tell. A repeat with the same biz_no
// tells: it replays the stored outcome if there is one, else runs anew.
// (Of 5,229 deductions answered 503 while PgBouncer was killed under them,
// 2 had been committed, when the answer said nothing had changed.)
var ErrOutcomeUnknown = errs.New(errs.Unavailable, "outcome unknown: repeat the call with the same biz_no")

// poolerRefusals are PgBouncer's connection errors (class 08) for a query
// it never sent: no server connection within query_wait_timeout, none to
// be had while server logins fail (server_login_retry), or none allowed.
var poolerRefusals = []string{"query_wait_timeout", "server login has been failing", "cannot connect to server",
	"no more connections allowed", "client_login_timeout", "pgbouncer is shutting down"}

// outcomeUnknown reports whether err, a dependency failure of a Postgres
// deduction's statement, came after the statement may have been executed:
// not an error pgx knows arose before anything was sent (SafeToRetry), no
// connection that was never made, no wait for a pooled connection that ran
// out of time, and no error the server answered (the statement then rolled
// back on its own) — except a connection error a pooler reports for the
// server connection it lost under the statement (class 08, not one of
// poolerRefusals).
func outcomeUnknown(err error) bool {
	var pge *pgconn.PgError
	if errors.As(err, &pge) {
		return strings.HasPrefix(pge.Code, "08") && !slices.ContainsFunc(poolerRefusals, func(m string) bool { return strings.Contains(pge.Message, m) })
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn) {
		return false
	}
	var marked interface{ SafeToRetry() bool }
	if !errors.As(err, &marked) && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		// database/sql's own wait for a connection: nothing was sent.
		return false
	}
	return true
}

// dependencyError is the 503 of a deduction's dependency failure err: on
// Postgres, ErrOutcomeUnknown when the statement may have run.
func (s *Service) dependencyError(err error) error {
	err = classify(err)
	if s.postgres && outcomeUnknown(err) {
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return unavailable(err)
}
