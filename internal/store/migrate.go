package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	"github.com/jackc/pgx/v5"

	entmigrate "gatehouse/ent/migrate"
)

// Report says what Migrate did, for the log and `gatehouse migrate`.
type Report struct {
	Dialect string
	// Applied are the migration files applied now, oldest first.
	Applied []string
	// Adopted is the file at which a database made by auto-migrate
	// (before versioned migrations) was taken over; empty otherwise.
	Adopted string
	// Repaired lists what was added to an adopted database to match the
	// baseline (it came from an older release).
	Repaired []string
	// Version is the version of the newest migration file.
	Version string
}

// Changed reports whether Migrate changed the schema.
func (r Report) Changed() bool {
	return len(r.Applied) > 0 || r.Adopted != ""
}

// String is one line for people: what was applied, or that nothing was.
func (r Report) String() string {
	var parts []string
	if r.Adopted != "" {
		s := "adopted the existing database (made before versioned migrations) at " + r.Adopted
		if len(r.Repaired) > 0 {
			s += " after adding what it lacked: " + strings.Join(r.Repaired, ", ")
		}
		parts = append(parts, s)
	}
	if len(r.Applied) > 0 {
		parts = append(parts, fmt.Sprintf("applied %d migration(s): %s", len(r.Applied), strings.Join(r.Applied, ", ")))
	}
	if len(parts) == 0 {
		parts = append(parts, "schema is up to date, nothing applied")
	}
	if r.Version != "" {
		parts = append(parts, "schema version "+r.Version)
	}
	return strings.Join(parts, "; ")
}

// migrationLock is the Postgres advisory lock key that serialises
// migrations of replicas starting together.
const migrationLock = 0x6761746568 // "gateh"

// Migrate brings the schema up to date (see MigrateReport).
func (d *DB) Migrate(ctx context.Context) error {
	_, err := d.MigrateReport(ctx)
	return err
}

// MigrateReport brings the schema up to date and says what it did: it
// applies the pending versioned migration files of the database's dialect
// (see docs/migrations.md). On Postgres it holds an advisory lock, so
// that replicas starting at once migrate one after another.
func (d *DB) MigrateReport(ctx context.Context) (Report, error) {
	if d.Dialect != dialect.Postgres {
		rep, err := d.migrateSQLite(ctx)
		if err != nil {
			return rep, fmt.Errorf("migrate: %w", err)
		}
		return rep, nil
	}
	v, err := versionedFor(dialect.Postgres)
	if err != nil {
		return Report{}, err
	}
	unlock, err := d.migrationLock(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("migrate: lock: %w", err)
	}
	defer unlock()
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	rep, err := migrateVersioned(ctx, conn, v)
	if err != nil {
		return rep, fmt.Errorf("migrate: %w", err)
	}
	return rep, nil
}

// migrationLock takes the migration lock on a connection of its own and
// returns the function that gives it back.
//
// On a session connection (the server reached directly, or the direct
// URL) it is a session advisory lock. Through a pooler without a direct
// URL a session lock would stay with whichever server connection the
// pooler lent, and could not be given back: the lock is then a
// transaction's (pg_try_advisory_xact_lock, tried again until it is
// got), held by a transaction kept open on that connection while the
// migrations run on another; the pooler keeps one server connection for
// an open transaction. Either way the
// lock dies with the connection if this process does.
func (d *DB) migrationLock(ctx context.Context) (unlock func(), err error) {
	cfg, err := pgx.ParseConfig(d.sessionURL())
	if err != nil {
		return nil, err
	}
	// Nothing prepared by name: through a pooler it would outlive this
	// connection on the server's.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return nil, err
	}
	closeConn := func() { _ = conn.Close(context.WithoutCancel(ctx)) }
	if d.directURL != "" || !d.pooler {
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
			closeConn()
			return nil, err
		}
		return func() {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock)
			closeConn()
		}, nil
	}
	// Waiting is done between transactions, not in one: a waiting replica
	// holds none of the pooler's server connections.
	for {
		tx, err := conn.Begin(ctx)
		if err != nil {
			closeConn()
			return nil, err
		}
		var got bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", migrationLock).Scan(&got); err != nil {
			closeConn()
			return nil, err
		}
		if got {
			return func() {
				_ = tx.Rollback(context.WithoutCancel(ctx))
				closeConn()
			}, nil
		}
		if err := tx.Rollback(ctx); err != nil {
			closeConn()
			return nil, err
		}
		select {
		case <-ctx.Done():
			closeConn()
			return nil, ctx.Err()
		case <-time.After(lockRetry):
		}
	}
}

// lockRetry is the pause between two tries of the migration lock through
// a pooler.
const lockRetry = 200 * time.Millisecond

// schema is Ent's migrator over the driver without error classification
// (Atlas reads its results as *sql.Rows), or the client's when there is
// no such driver (a DB built by hand in a test).
func (d *DB) schema() *entmigrate.Schema {
	if d.raw != nil {
		return entmigrate.NewSchema(d.raw)
	}
	return d.Schema
}
