package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"gatehouse/internal/errs"
)

// IsUnavailable reports whether err means that the database could not do
// the work now, though the same request may succeed later: it did not
// answer in time (the request's deadline, or the client hung up), the
// connection failed or was lost, or the server refused for a transient
// reason (shutting down, out of connections, a lock wait that timed out,
// a serialization failure; SQLite busy). Such a failure is the caller's
// 503, never a 500.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var (
		ne  net.Error
		pge *pgconn.PgError
		ce  *pgconn.ConnectError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.As(err, &ne), errors.As(err, &ce), pgconn.Timeout(err):
		return true
	case errors.As(err, &pge):
		return transientSQLState(pge.Code)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // primary result code
		case 5, 6, 9: // SQLITE_BUSY, SQLITE_LOCKED, SQLITE_INTERRUPT (context done)
			return true
		}
	}
	// pgconn reports a connection that died under it with plain errors.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection reset by peer") ||
		strings.Contains(msg, "broken pipe")
}

// transientSQLState: connection exceptions (08), operator intervention
// such as a shutdown (57), insufficient resources (53), serialization
// failure and deadlock (40001, 40P01), lock not available and query
// cancelled by a lock or statement timeout (55P03, 57014 is in 57).
func transientSQLState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "57"), strings.HasPrefix(code, "53"):
		return true
	}
	switch code {
	case "40001", "40P01", "55P03":
		return true
	}
	return false
}

// classify marks an unavailable database with errs.Unavailable, once, at
// the storage boundary; every other error passes unchanged.
func classify(err error) error {
	if err == nil || errs.KindOf(err) != errs.Internal {
		return err
	}
	var pge *pgconn.PgError
	if errors.As(err, &pge) && pge.Code == "22021" {
		// A NUL character reached Postgres (the front doors refuse it
		// first; this keeps any path they miss a 400, not a 500).
		return &errs.Error{Kind: errs.Validation, Msg: "text must not contain the NUL character (U+0000)", Err: err}
	}
	if !IsUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w unavailable: %w", errs.Unavailable, errs.Database, err)
}

// Classify is classify for code that uses the pool (DB.SQL) directly
// rather than through Ent.
func Classify(err error) error { return classify(err) }

// classifyingDriver is the Ent driver with its errors classified, so that
// every domain service's database failure reaches the front doors as
// errs.Unavailable without each service translating it.
//
// On Postgres it also runs every write that Ent would send outside a
// transaction (single-row inserts, bulk updates and deletes) inside one,
// committed only while the caller's context is alive. A statement sent in autocommit
// mode to a database that has stopped answering would still be executed
// once it resumes, after the client was told 503 (or gave up): a write
// whose request got no answer would then exist after all. Inside a
// transaction the COMMIT is never sent for such a request, and the server
// rolls the work back when it finds the connection closed. (On SQLite,
// in this process, nothing can run later: see sqliteWrites.)
//
// On SQLite every transaction takes the database's single write lock at
// BEGIN (BEGIN IMMEDIATE), and a writer that finds it taken polls for it
// (busy_timeout) with sleeps of up to 100 ms. Under contention a newcomer
// that asks the moment the lock is free beats the sleepers, and a sleeper
// can lose for seconds: 20 concurrent status changes of one ticket on a
// busy machine saw five of them wait 10 s and fail. writers, a queue of
// one, makes the process's writers wait their turn in Go instead, first
// come first served and for no longer than their request's deadline;
// SQLite's own polling remains only for another process on the same file.
type classifyingDriver struct {
	dialect.Driver
	writers chan struct{} // nil on Postgres, where row locks do this job
	// sqlite runs single writes without a transaction on SQLite (see
	// sqliteWrites); nil on Postgres.
	sqlite *sqliteWrites
	// pg runs them in a transaction of two round trips on Postgres (see
	// pgWrites); nil on SQLite.
	pg *pgWrites
}

// begin opens a transaction, first waiting for the write turn on SQLite.
func (d classifyingDriver) begin(ctx context.Context, open func() (dialect.Tx, error)) (dialect.Tx, error) {
	release, err := writeTurn(ctx, d.writers)
	if err != nil {
		return nil, err
	}
	tx, err := open()
	if err != nil {
		release()
		return nil, classify(err)
	}
	return classifyingTx{Tx: tx, release: release}, nil
}

// writeTurn waits for the write turn in writers (nil: no turns, Postgres)
// and returns the function that gives it back (safe to call twice). Work
// without a deadline (background jobs) waits as long as SQLite's
// busy_timeout would have.
func writeTurn(ctx context.Context, writers chan struct{}) (release func(), err error) {
	if writers == nil {
		return func() {}, nil
	}
	var expire <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := time.NewTimer(sqliteBusyTimeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case writers <- struct{}{}:
	case <-ctx.Done():
		return nil, classify(ctx.Err())
	case <-expire:
		return nil, fmt.Errorf("%w: %w: waited %s for the SQLite write lock", errs.Unavailable, errs.Database, sqliteBusyTimeout)
	}
	var once sync.Once
	return func() { once.Do(func() { <-writers }) }, nil
}

func (d classifyingDriver) Exec(ctx context.Context, query string, args, v any) error {
	if !isWrite(query) {
		return classify(d.Driver.Exec(ctx, query, args, v))
	}
	if d.sqlite != nil {
		return d.sqlite.exec(ctx, d.writers, query, args, v)
	}
	if d.pg != nil {
		return d.pg.exec(ctx, query, args, v)
	}
	tx, err := d.Tx(ctx)
	if err != nil {
		return err
	}
	if err := tx.Exec(ctx, query, args, v); err != nil {
		_ = tx.Rollback()
		return classify(err)
	}
	return classify(tx.Commit()) // database/sql refuses to commit once ctx is done
}

func (d classifyingDriver) Query(ctx context.Context, query string, args, v any) error {
	rows, ok := v.(*entsql.Rows)
	if !ok || !isWrite(query) {
		return classify(d.Driver.Query(ctx, query, args, v))
	}
	if d.sqlite != nil {
		return d.sqlite.query(ctx, d.writers, query, args, rows)
	}
	if d.pg != nil {
		return d.pg.query(ctx, query, args, rows)
	}
	tx, err := d.Tx(ctx)
	if err != nil {
		return err
	}
	if err := tx.Query(ctx, query, args, v); err != nil {
		_ = tx.Rollback()
		return classify(err)
	}
	rows.ColumnScanner = &committingRows{ColumnScanner: rows.ColumnScanner, tx: tx}
	return nil
}

// isWrite reports whether query changes data (Ent writes its statements
// with these leading keywords).
func isWrite(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	for _, kw := range []string{"INSERT", "UPDATE", "DELETE"} {
		if len(q) >= len(kw) && strings.EqualFold(q[:len(kw)], kw) {
			return true
		}
	}
	return false
}

// committingRows are the results of a write (INSERT … RETURNING) run in
// its own transaction: the transaction commits when the results have been
// read to the end, and a failed commit is reported by Err, which Ent's
// scanners check after the last row. Closed early, it rolls back.
type committingRows struct {
	entsql.ColumnScanner
	tx   dialect.Tx
	done bool
	err  error
}

func (r *committingRows) finish(commit bool) {
	if r.done {
		return
	}
	r.done = true
	if err := r.ColumnScanner.Err(); err != nil {
		commit = false
		r.err = classify(err)
	}
	_ = r.ColumnScanner.Close()
	if !commit {
		_ = r.tx.Rollback()
		return
	}
	r.err = classify(r.tx.Commit())
}

func (r *committingRows) Next() bool {
	if r.done {
		return false
	}
	if r.ColumnScanner.Next() {
		return true
	}
	r.finish(true)
	return false
}

func (r *committingRows) Err() error {
	if r.done {
		return r.err
	}
	return classify(r.ColumnScanner.Err())
}

func (r *committingRows) Scan(dest ...any) error { return classify(r.ColumnScanner.Scan(dest...)) }

func (r *committingRows) Close() error {
	r.finish(false)
	return nil
}

func (d classifyingDriver) Tx(ctx context.Context) (dialect.Tx, error) {
	return d.begin(ctx, func() (dialect.Tx, error) { return d.Driver.Tx(ctx) })
}

// BeginTx keeps Ent's Client.BeginTx working through the wrapper.
func (d classifyingDriver) BeginTx(ctx context.Context, opts *sql.TxOptions) (dialect.Tx, error) {
	b, ok := d.Driver.(interface {
		BeginTx(context.Context, *sql.TxOptions) (dialect.Tx, error)
	})
	if !ok {
		return nil, errors.New("store: driver does not support BeginTx")
	}
	return d.begin(ctx, func() (dialect.Tx, error) { return b.BeginTx(ctx, opts) })
}

// classifyingTx classifies a transaction's errors and gives up the write
// turn (SQLite) when it ends.
type classifyingTx struct {
	dialect.Tx
	release func()
}

func (t classifyingTx) Exec(ctx context.Context, query string, args, v any) error {
	return classify(t.Tx.Exec(ctx, query, args, v))
}

func (t classifyingTx) Query(ctx context.Context, query string, args, v any) error {
	return classify(t.Tx.Query(ctx, query, args, v))
}

// ExecContext lets Ent's ExecContext (raw statements: the webhook
// outbox's NOTIFY) pass the wrapper, classified like any statement.
func (t classifyingTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var r sql.Result
	err := t.Exec(ctx, query, args, &r)
	return r, err
}

// ExecContext is classifyingTx.ExecContext outside a transaction.
func (d classifyingDriver) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var r sql.Result
	err := d.Exec(ctx, query, args, &r)
	return r, err
}

func (t classifyingTx) Commit() error {
	defer t.release()
	return classify(t.Tx.Commit())
}

func (t classifyingTx) Rollback() error {
	defer t.release()
	return classify(t.Tx.Rollback())
}
