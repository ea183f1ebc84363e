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
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Stmt is a hot read written once in SQL, for the few queries that run on
// every request (the signed order query). Through Ent every query builds
// its SQL string anew and, on SQLite, is parsed again each time.
//
// On SQLite it is prepared once per pool connection (database/sql
// prepares it again on a connection that has not seen it, so a reopened
// connection is covered). On Postgres it runs on a pool of its own through
// pgx directly (pgxpool), not database/sql: pgx prepares it once per
// connection (its statement cache, keyed by the SQL text), and a read
// skips database/sql's per-query work — a goroutine watching the context,
// locks, and each column converted to a driver.Value and back (about a
// third of the read's CPU under load: 24 → 16 µs per read in profiles;
// docs/performance.md).
//
// Writes keep going through Ent (and its transactions); Stmt is for
// single-statement reads.
type Stmt struct {
	db    *sql.DB       // SQLite
	pg    *pgxpool.Pool // Postgres
	query string

	mu   sync.Mutex // held while preparing (SQLite)
	stmt atomic.Pointer[sql.Stmt]
}

// NewStmt returns query, written with ? placeholders (turned into $1, $2…
// on Postgres), to be prepared on first use.
func NewStmt(db *DB, query string) *Stmt {
	if db.Dialect == dialect.Postgres {
		return &Stmt{pg: db.pgReads, query: dollarPlaceholders(query)}
	}
	return &Stmt{db: db.SQL, query: query}
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
	if s.pg != nil {
		err := s.pg.QueryRow(ctx, s.query, args...).Scan(dest...)
		if err != nil && pgconn.SafeToRetry(err) && ctx.Err() == nil {
			// Nothing reached the server (a connection that died while
			// idle, say after a restart): once more on another, as
			// database/sql does with a bad connection.
			err = s.pg.QueryRow(ctx, s.query, args...).Scan(dest...)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return sql.ErrNoRows
		}
		return classify(err)
	}
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
