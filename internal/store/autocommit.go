package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// sqliteWrites runs the writes Ent sends outside a transaction on SQLite
// (a single INSERT, UPDATE or DELETE) as one prepared statement in
// autocommit mode, during the process's write turn.
//
// The transaction that wraps such writes on Postgres is not needed here:
// SQLite runs inside this process, so nothing sent can be executed later.
// A statement whose context ends before it ran is not started, and one
// that is running is interrupted and rolled back (SQLITE_INTERRUPT); what
// completes is committed before the caller reads its result, as a COMMIT
// would have been. Leaving out BEGIN and COMMIT takes two statements of
// three out of the write turn, and preparing each statement once per
// connection (Ent's SQL for a given write is always the same text) saves
// parsing it again inside the turn.
type sqliteWrites struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// maxPreparedWrites bounds the statements kept: Ent writes one text per
// combination of set fields, so the set is finite, but a bound keeps an
// unexpected source of varying SQL from growing it without end.
const maxPreparedWrites = 256

// stmt returns the prepared statement for query, or nil when the cache is
// full (the caller then runs query unprepared).
func (w *sqliteWrites) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	w.mu.Lock()
	s, ok := w.stmts[query]
	full := len(w.stmts) >= maxPreparedWrites
	w.mu.Unlock()
	if ok || full {
		return s, nil
	}
	s, err := w.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.stmts[query]; ok {
		_ = s.Close()
		return prev, nil
	}
	w.stmts[query] = s
	return s, nil
}

func (w *sqliteWrites) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for q, s := range w.stmts {
		_ = s.Close()
		delete(w.stmts, q)
	}
}

// exec runs a write without results during the write turn.
func (w *sqliteWrites) exec(ctx context.Context, turns chan struct{}, query string, args, v any) error {
	argv, ok := args.([]any)
	if !ok && args != nil {
		return fmt.Errorf("store: invalid type %T for args; expected []any", args)
	}
	release, err := writeTurn(ctx, turns)
	if err != nil {
		return err
	}
	defer release()
	s, err := w.stmt(ctx, query)
	if err != nil {
		return classify(err)
	}
	var res sql.Result
	if s != nil {
		res, err = s.ExecContext(ctx, argv...)
	} else {
		res, err = w.db.ExecContext(ctx, query, argv...)
	}
	if err != nil {
		return classify(err)
	}
	switch v := v.(type) {
	case nil:
	case *sql.Result:
		*v = res
	default:
		return fmt.Errorf("store: invalid type %T for Exec; expected *sql.Result", v)
	}
	return nil
}

// query runs a write with results (INSERT … RETURNING) during the write
// turn, which is given back when the results are read or closed.
func (w *sqliteWrites) query(ctx context.Context, turns chan struct{}, query string, args any, rows *entsql.Rows) error {
	argv, ok := args.([]any)
	if !ok && args != nil {
		return fmt.Errorf("store: invalid type %T for args; expected []any", args)
	}
	release, err := writeTurn(ctx, turns)
	if err != nil {
		return err
	}
	s, err := w.stmt(ctx, query)
	if err != nil {
		release()
		return classify(err)
	}
	var r *sql.Rows
	if s != nil {
		r, err = s.QueryContext(ctx, argv...)
	} else {
		r, err = w.db.QueryContext(ctx, query, argv...)
	}
	if err != nil {
		release()
		return classify(err)
	}
	rows.ColumnScanner = &turnRows{Rows: r, release: release}
	return nil
}

// turnRows are a write's results read during the write turn: the turn is
// given back once they are read to the end or closed.
type turnRows struct {
	*sql.Rows
	release func()
}

func (r *turnRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.release() // database/sql has closed the rows: the statement is done
	return false
}

func (r *turnRows) Close() error {
	err := r.Rows.Close()
	r.release()
	return classify(err)
}

func (r *turnRows) Err() error             { return classify(r.Rows.Err()) }
func (r *turnRows) Scan(dest ...any) error { return classify(r.Rows.Scan(dest...)) }

// pgWrites runs the writes Ent sends outside a transaction on Postgres in
// a transaction of their own, as the classifying driver requires (see
// classifyingDriver).
//
// With a deadline on the caller's context (every request has one) it is
// one round trip: one pgx batch of the statement and a call of
// gatehouse_not_after(deadline), one implicit transaction that the server
// commits at the batch's end only if the check passed. A write the server
// runs after its caller gave up (a frozen server resuming, a long lock
// wait) raises query_canceled there and is rolled back, so a caller told
// 503 is right. The window left is the commit itself: if the server
// committed just before the deadline and the reply came too late, the
// write is there although the caller was told it failed (as for a
// deduction). A caller that hangs up before the deadline cannot stop a
// write already sent: the server commits it if it runs it in time (see
// docs/decisions.md).
//
// Without a deadline it is two round trips: BEGIN and the statement in one
// batch (Batch.BeginTx), then COMMIT, sent only if the caller's context is
// still alive once the statement's results are in; otherwise the
// connection is closed unused, and the server rolls the work back.
type pgWrites struct {
	db *sql.DB
}

// run runs query with args in its own transaction; with results, their
// rows are read into memory (a write's RETURNING clause: a few values).
func (w pgWrites) run(ctx context.Context, query string, args any, results bool) (tag pgconn.CommandTag, rows *pgRows, err error) {
	argv, ok := args.([]any)
	if !ok && args != nil {
		return tag, nil, fmt.Errorf("store: invalid type %T for args; expected []any", args)
	}
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return tag, nil, classify(err)
	}
	defer conn.Close()
	notAfter, guarded := ctx.Deadline()
	rawErr := conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		if guarded {
			tag, rows, err = runBefore(ctx, c, notAfter, query, argv, results)
			if c.IsClosed() || c.PgConn().TxStatus() != 'I' {
				return driver.ErrBadConn
			}
			return nil
		}
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{})
		b.Queue(query, argv...)
		br := c.SendBatch(ctx, b)
		if _, err = br.Exec(); err == nil { // BEGIN
			if results {
				rows, err = readRows(br, c.TypeMap())
			} else {
				tag, err = br.Exec()
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		tx := br.Tx()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				_ = tx.Rollback(ctx)
			}
		case ctx.Err() != nil:
			// The caller gave up: no COMMIT; the connection goes (below).
			err = ctx.Err()
		default:
			err = tx.Commit(ctx)
		}
		if c.IsClosed() || c.PgConn().TxStatus() != 'I' {
			return driver.ErrBadConn // closed, not pooled: the server rolls back
		}
		return nil
	})
	if err == nil && rawErr != nil {
		err = rawErr
	}
	if err != nil {
		return tag, nil, classify(err)
	}
	return tag, rows, nil
}

// runBefore runs query with args and the deadline check in one batch:
// one round trip, one implicit transaction, committed by the server only
// if the check passed.
func runBefore(ctx context.Context, c *pgx.Conn, notAfter time.Time, query string, argv []any, results bool) (tag pgconn.CommandTag, rows *pgRows, err error) {
	b := &pgx.Batch{}
	b.Queue(query, argv...)
	b.Queue(notAfterCheck, notAfter)
	br := c.SendBatch(ctx, b)
	if results {
		rows, err = readRows(br, c.TypeMap())
	} else {
		tag, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec() // the check
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, rows, err
}

// notAfterCheck raises query_canceled past its argument (migration
// …_not_after_function.sql).
const notAfterCheck = `SELECT gatehouse_not_after($1)`

// exec is run for a write without results (Ent's Exec).
func (w pgWrites) exec(ctx context.Context, query string, args, v any) error {
	tag, _, err := w.run(ctx, query, args, false)
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
	case *sql.Result:
		*v = driver.RowsAffected(tag.RowsAffected())
	default:
		return fmt.Errorf("store: invalid type %T for Exec; expected *sql.Result", v)
	}
	return nil
}

// query is run for a write with results (Ent's Query: INSERT … RETURNING).
func (w pgWrites) query(ctx context.Context, query string, args any, rows *entsql.Rows) error {
	_, r, err := w.run(ctx, query, args, true)
	if err != nil {
		return err
	}
	rows.ColumnScanner = r
	return nil
}

// readRows reads the next result of br into memory.
func readRows(br pgx.BatchResults, tm *pgtype.Map) (*pgRows, error) {
	r, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := &pgRows{tm: tm, fields: append([]pgconn.FieldDescription(nil), r.FieldDescriptions()...), next: -1}
	for r.Next() {
		raw := r.RawValues()
		row := make([][]byte, len(raw))
		for i, v := range raw {
			if v != nil {
				row[i] = append([]byte{}, v...)
			}
		}
		out.rows = append(out.rows, row)
	}
	return out, r.Err()
}

// pgRows are a write's results, read before its transaction committed,
// decoded as pgx decodes any result.
type pgRows struct {
	tm     *pgtype.Map
	fields []pgconn.FieldDescription
	rows   [][][]byte
	next   int
}

func (r *pgRows) Next() bool {
	if r.next+1 >= len(r.rows) {
		r.next = len(r.rows)
		return false
	}
	r.next++
	return true
}

func (r *pgRows) Scan(dest ...any) error {
	if r.next < 0 || r.next >= len(r.rows) {
		return errors.New("store: Scan called without a current row")
	}
	if len(dest) != len(r.fields) {
		return fmt.Errorf("store: %d destinations for %d columns", len(dest), len(r.fields))
	}
	for i, d := range dest {
		f := r.fields[i]
		if err := r.tm.Scan(f.DataTypeOID, f.Format, r.rows[r.next][i], d); err != nil {
			return fmt.Errorf("store: scan column %s: %w", f.Name, err)
		}
	}
	return nil
}

func (r *pgRows) Columns() ([]string, error) {
	names := make([]string, len(r.fields))
	for i, f := range r.fields {
		names[i] = f.Name
	}
	return names, nil
}

func (r *pgRows) ColumnTypes() ([]*sql.ColumnType, error) {
	return nil, errors.New("store: column types of a write's results are not available")
}

func (r *pgRows) Err() error          { return nil }
func (r *pgRows) NextResultSet() bool { return false }
func (r *pgRows) Close() error        { return nil }
