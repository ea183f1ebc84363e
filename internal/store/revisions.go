package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"ariga.io/atlas/sql/migrate"
	"entgo.io/ent/dialect"
)

// revisionsTable records the migration files applied to a database, one
// row per file, in the columns Atlas's own tools use.
const revisionsTable = "atlas_schema_revisions"

// querier is what a *sql.Conn and a *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// revisions is Atlas's migrate.RevisionReadWriter over revisionsTable in
// the connection's current schema; dialect is the database's (dialect.Postgres
// or dialect.SQLite).
type revisions struct {
	q       querier
	dialect string
}

var _ migrate.RevisionReadWriter = revisions{}

// createRevisions makes the table; SQLite's column types are those its
// driver reads back as times and JSON.
func createRevisions(dialectName string) string {
	timestamp, json := "timestamptz", "jsonb"
	if dialectName == dialect.SQLite {
		timestamp, json = "datetime", "json"
	}
	return `CREATE TABLE IF NOT EXISTS ` + revisionsTable + ` (
	version          text PRIMARY KEY,
	description      text NOT NULL,
	type             bigint NOT NULL DEFAULT 2,
	applied          bigint NOT NULL DEFAULT 0,
	total            bigint NOT NULL DEFAULT 0,
	executed_at      ` + timestamp + ` NOT NULL,
	execution_time   bigint NOT NULL,
	error            text,
	error_stmt       text,
	hash             text NOT NULL,
	partial_hashes   ` + json + `,
	operator_version text NOT NULL
)`
}

// ensure creates the table when it is missing.
func (r revisions) ensure(ctx context.Context) error {
	if _, err := r.q.ExecContext(ctx, createRevisions(r.dialect)); err != nil {
		return fmt.Errorf("create %s: %w", revisionsTable, err)
	}
	return nil
}

// Ident names the table, so that Atlas does not count it as content.
func (revisions) Ident() *migrate.TableIdent { return &migrate.TableIdent{Name: revisionsTable} }

const selectRevisions = `SELECT version, description, type, applied, total, executed_at, execution_time,
	coalesce(error, ''), coalesce(error_stmt, ''), hash, partial_hashes, operator_version FROM ` + revisionsTable

// ReadRevisions returns every revision, oldest version first.
func (r revisions) ReadRevisions(ctx context.Context) ([]*migrate.Revision, error) {
	rows, err := r.q.QueryContext(ctx, selectRevisions+` ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*migrate.Revision
	for rows.Next() {
		rev, err := scanRevision(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, rev)
	}
	return out, rows.Err()
}

// ReadRevision returns the revision of version, or migrate.ErrRevisionNotExist.
func (r revisions) ReadRevision(ctx context.Context, version string) (*migrate.Revision, error) {
	rev, err := scanRevision(r.q.QueryRowContext(ctx, selectRevisions+` WHERE version = $1`, version).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, migrate.ErrRevisionNotExist
	}
	return rev, err
}

// WriteRevision inserts or replaces the revision of rev.Version.
func (r revisions) WriteRevision(ctx context.Context, rev *migrate.Revision) error {
	partial, err := json.Marshal(rev.PartialHashes)
	if err != nil {
		return err
	}
	_, err = r.q.ExecContext(ctx, `INSERT INTO `+revisionsTable+`
		(version, description, type, applied, total, executed_at, execution_time, error, error_stmt, hash, partial_hashes, operator_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), nullif($9, ''), $10, $11, $12)
		ON CONFLICT (version) DO UPDATE SET description = EXCLUDED.description, type = EXCLUDED.type,
			applied = EXCLUDED.applied, total = EXCLUDED.total, executed_at = EXCLUDED.executed_at,
			execution_time = EXCLUDED.execution_time, error = EXCLUDED.error, error_stmt = EXCLUDED.error_stmt,
			hash = EXCLUDED.hash, partial_hashes = EXCLUDED.partial_hashes, operator_version = EXCLUDED.operator_version`,
		rev.Version, rev.Description, int64(rev.Type), rev.Applied, rev.Total, rev.ExecutedAt, int64(rev.ExecutionTime),
		rev.Error, rev.ErrorStmt, rev.Hash, string(partial), rev.OperatorVersion)
	return err
}

// DeleteRevision removes the revision of version.
func (r revisions) DeleteRevision(ctx context.Context, version string) error {
	_, err := r.q.ExecContext(ctx, `DELETE FROM `+revisionsTable+` WHERE version = $1`, version)
	return err
}

func scanRevision(scan func(...any) error) (*migrate.Revision, error) {
	var (
		rev      migrate.Revision
		typ      int64
		execTime int64
		partial  []byte
	)
	if err := scan(&rev.Version, &rev.Description, &typ, &rev.Applied, &rev.Total, &rev.ExecutedAt, &execTime,
		&rev.Error, &rev.ErrorStmt, &rev.Hash, &partial, &rev.OperatorVersion); err != nil {
		return nil, err
	}
	rev.Type = migrate.RevisionType(typ)
	rev.ExecutionTime = time.Duration(execTime)
	if len(partial) > 0 && string(partial) != "null" {
		if err := json.Unmarshal(partial, &rev.PartialHashes); err != nil {
			return nil, fmt.Errorf("%s %s: partial hashes: %w", revisionsTable, rev.Version, err)
		}
	}
	return &rev, nil
}
