package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"entgo.io/ent/dialect"
)

// Stmt is a hot read written once in SQL and prepared once per pool
// connection, for the few queries that run on every request (the signed
// order query). Through Ent every query builds its SQL string anew and,
// on SQLite, is parsed again each time; a prepared statement is parsed
// once per connection (database/sql prepares it again on a connection
// that has not seen it, so a reopened connection is covered). On
// Postgres, pgx caches the statements of any fixed SQL text per
// connection as well; Stmt makes that explicit and skips the building.
//
// Writes keep going through Ent (and its transactions); Stmt is for
// single-statement reads, and runs them on the read pool (see Open).
type Stmt struct {
	db    *sql.DB
	query string

	mu   sync.Mutex // held while preparing
	stmt atomic.Pointer[sql.Stmt]
}

// NewStmt returns query, written with ? placeholders (turned into $1, $2…
// on Postgres), to be prepared on first use.
func NewStmt(db *DB, query string) *Stmt {
	if db.Dialect == dialect.Postgres {
		query = dollarPlaceholders(query)
	}
	return &Stmt{db: db.reads, query: query}
}

// prepared prepares the statement the first time; a failed attempt (the
// database was away) is retried by the next call.
func (s *Stmt) prepared(ctx context.Context) (*sql.Stmt, error) {
	if st := s.stmt.Load(); st != nil {
		return st, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stmt.Load(); st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, s.query)
	if err != nil {
		return nil, classify(err)
	}
	s.stmt.Store(st)
	return st, nil
}

// QueryRow runs the statement with args and scans its first row into
// dest. No row is sql.ErrNoRows; a database that could not answer is
// errs.Unavailable, like every error through Ent.
func (s *Stmt) QueryRow(ctx context.Context, args []any, dest ...any) error {
	st, err := s.prepared(ctx)
	if err != nil {
		return err
	}
	err = st.QueryRowContext(ctx, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return sql.ErrNoRows
	}
	return classify(err)
}

// Close releases the statement on every connection.
func (s *Stmt) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stmt.Swap(nil)
	if st == nil {
		return nil
	}
	return st.Close()
}

// dollarPlaceholders turns the ? placeholders of query into $1, $2, …
// (the queries given to NewStmt hold no ? in literals).
func dollarPlaceholders(query string) string {
	var b strings.Builder
	n := 0
	for {
		i := strings.IndexByte(query, '?')
		if i < 0 {
			b.WriteString(query)
			return b.String()
		}
		n++
		b.WriteString(query[:i])
		b.WriteString("$" + strconv.Itoa(n))
		query = query[i+1:]
	}
}
