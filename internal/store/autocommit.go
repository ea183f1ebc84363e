package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	entsql "entgo.io/ent/dialect/sql"
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
