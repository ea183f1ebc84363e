// Package store opens the Ent client on the embedded SQLite file or on
// Postgres (through pgx), migrates the schema (versioned migration files,
// one directory per database, see docs/migrations.md), and runs
// transactions.
package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/XSAM/otelsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" driver
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go, no cgo)

	"gatehouse/ent"
	_ "gatehouse/ent/runtime" // registers schema defaults and hooks
)

// DB is an open database: the Ent client and the pool under it.
type DB struct {
	*ent.Client
	SQL *sql.DB
	// pgReads is the Postgres pool of the hot single-statement reads
	// (Stmt), sized by CPU and used through pgx directly; nil on SQLite,
	// where they use SQL.
	pgReads *pgxpool.Pool
	Dialect string // dialect.SQLite or dialect.Postgres
	// raw is Ent's driver without error classification: the schema
	// migration reads its results as *sql.Rows.
	raw dialect.Driver
	url string // for the dedicated connections of Listen
	// directURL is the session connection's URL (WithDirectURL).
	directURL string
	// pooler: url leads to a connection pooler (detectPooler).
	pooler bool
	// writers is the SQLite write turn shared with the Ent driver (nil on
	// Postgres); see WriteTurn.
	writers chan struct{}
	// writes holds SQLite's prepared single writes (nil on Postgres).
	writes *sqliteWrites
}

// WriteTurn is for code that writes through the pool (DB.SQL) rather than
// through Ent. On SQLite it waits, first come first served and for no
// longer than ctx allows, for the turn every transaction of this process
// takes before BEGIN (the same turn Ent's transactions take), and returns
// the function that gives it back; hold it until the transaction has
// committed or rolled back. On Postgres it returns at once (row locks do
// that job). A turn not granted in time is errs.Unavailable.
func (d *DB) WriteTurn(ctx context.Context) (release func(), err error) {
	return writeTurn(ctx, d.writers)
}

// SQLite's synchronous settings (GATEHOUSE_SQLITE_SYNC). With FULL, a
// commit returns only once the WAL is flushed to the disk (fsync), so an
// acknowledged write survives a power cut; NORMAL flushes only at
// checkpoints, which survives a crash of the process but may lose the
// last commits on a power cut or OS crash, and is faster.
const (
	SQLiteSyncFull   = "full"
	SQLiteSyncNormal = "normal"
)

// SQLiteSyncModes lists the accepted synchronous settings, default first.
var SQLiteSyncModes = []string{SQLiteSyncFull, SQLiteSyncNormal}

// SQLiteDSN is the modernc DSN of the SQLite file at path with gatehouse's
// settings and the synchronous setting sync (SQLiteSyncFull or
// SQLiteSyncNormal; anything else is FULL). The load harness opens its
// SQLite floors with it, so they pay for the same durability.
//
// WAL lets readers run beside the one writer; _txlock=immediate takes the
// write lock at BEGIN so two read-then-write transactions wait for each
// other (busy_timeout) instead of failing with SQLITE_BUSY.
func SQLiteDSN(path, sync string) string {
	pragma := "FULL"
	if strings.EqualFold(sync, SQLiteSyncNormal) {
		pragma = "NORMAL"
	}
	return "file:" + path + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(" + strconv.Itoa(int(sqliteBusyTimeout.Milliseconds())) +
		")&_pragma=journal_mode(WAL)&_pragma=synchronous(" + pragma + ")&_txlock=immediate&_time_format=sqlite"
}

// Option changes how Open opens the database.
type Option func(*options)

type options struct {
	sqliteSync          string
	directURL           string
	maxConns, readConns int
	tracer              trace.TracerProvider
}

// WithDirectURL names a session connection to the same Postgres database
// (GATEHOUSE_DATABASE_DIRECT_URL), for LISTEN and the migration lock when
// the database URL goes through a transaction pooler; empty: the database
// URL itself.
func WithDirectURL(url string) Option { return func(o *options) { o.directURL = url } }

// WithPoolSizes bounds the Postgres write pool (transactions and writes;
// 0: DefaultMaxConns) and the pool of the hot single-statement reads (0:
// DefaultReadConns()).
func WithPoolSizes(maxConns, readConns int) Option {
	return func(o *options) { o.maxConns, o.readConns = maxConns, readConns }
}

// WithTracing makes a span per statement through tp: otelpgx on
// Postgres (both pools), otelsql on SQLite. Statements are recorded
// without their arguments. Nil: none (the drivers are not wrapped).
func WithTracing(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tp }
}

// WithSQLiteSync sets SQLite's synchronous setting (SQLiteSyncFull, the
// default, or SQLiteSyncNormal; empty keeps the default); it has no
// effect on Postgres.
func WithSQLiteSync(mode string) Option {
	return func(o *options) {
		if mode != "" {
			o.sqliteSync = mode
		}
	}
}

// Open connects to url ("sqlite:PATH" or "postgres://…") without
// migrating.
//
// On Postgres it first finds out whether url leads to the server itself
// or to a connection pooler (see detectPooler). Through a pooler no
// statement is prepared by name: pgx's default statement cache names
// prepared statements per client connection, which a pooler in
// transaction mode hands from one server connection to another
// (PgBouncer before 1.21 then fails with SQLSTATE 42P05 or 26000).
// Statements run as unnamed ones instead, their descriptions cached
// (pgx's cache_describe mode): still one round trip each, the server
// parses and plans them every time. A default_query_exec_mode given in
// the URL is kept as it is.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	o := options{sqliteSync: SQLiteSyncFull}
	for _, opt := range opts {
		opt(&o)
	}
	var (
		db          *sql.DB
		pgReads     *pgxpool.Pool
		dialectName string
		pooler      bool
		err         error
	)
	switch {
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if path == "" {
			return nil, errors.New("sqlite: empty path")
		}
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("create database directory: %w", err)
			}
		}
		if !slices.Contains(SQLiteSyncModes, strings.ToLower(o.sqliteSync)) {
			return nil, fmt.Errorf("sqlite: synchronous setting %q: want one of %s", o.sqliteSync, strings.Join(SQLiteSyncModes, ", "))
		}
		if o.tracer != nil {
			db, err = otelsql.Open("sqlite", SQLiteDSN(path, o.sqliteSync), otelsql.WithTracerProvider(o.tracer),
				otelsql.WithAttributes(semconv.DBSystemNameSQLite),
				otelsql.WithSpanOptions(otelsql.SpanOptions{
					OmitConnResetSession: true, OmitConnPrepare: true, OmitRows: true, OmitConnectorConnect: true,
					DisableErrSkip: true, DisableQuery: true,
				}))
		} else {
			db, err = sql.Open("sqlite", SQLiteDSN(path, o.sqliteSync))
		}
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		// Every connection is kept (database/sql keeps 2 idle by default):
		// reopening one runs the pragmas again and loses its prepared
		// statements.
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
		dialectName = dialect.SQLite
	case IsPostgresURL(url):
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		if o.directURL != "" {
			if !IsPostgresURL(o.directURL) {
				return nil, errors.New("open postgres: the direct URL must start with postgres:// or postgresql://")
			}
			if _, err := pgx.ParseConfig(o.directURL); err != nil {
				return nil, fmt.Errorf("open postgres: direct URL: %w", err)
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		pooler, err = detectPooler(pctx, cfg.ConnConfig)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("connect to database: %w", err)
		}
		if pooler && !strings.Contains(url, "default_query_exec_mode") {
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		}
		if o.tracer != nil {
			// Both pools: the database/sql one (a copy) and the reads'.
			cfg.ConnConfig.Tracer = newPGTracer(o.tracer)
		}
		db = stdlib.OpenDB(*cfg.ConnConfig.Copy())
		// Idle = open: with fewer idle than open slots, more concurrent
		// requests than idle slots close and reopen connections all the
		// time (a new server process each, and pgx's statement cache lost).
		writes := cmp.Or(o.maxConns, DefaultMaxConns)
		db.SetMaxOpenConns(writes)
		db.SetMaxIdleConns(writes)
		db.SetConnMaxIdleTime(5 * time.Minute)
		cfg.MaxConns = int32(cmp.Or(o.readConns, DefaultReadConns()))
		cfg.MaxConnIdleTime = 5 * time.Minute
		// Connections are opened on first use, as database/sql does.
		if pgReads, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			db.Close()
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		dialectName = dialect.Postgres
	default:
		return nil, errors.New("database URL must start with sqlite:, postgres:// or postgresql://")
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		if pgReads != nil {
			pgReads.Close()
		}
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	raw := entsql.OpenDB(dialectName, db)
	drv := classifyingDriver{Driver: raw}
	if dialectName == dialect.SQLite {
		drv.writers = make(chan struct{}, 1)
		drv.sqlite = &sqliteWrites{db: db, stmts: map[string]*sql.Stmt{}}
	} else {
		drv.pg = &pgWrites{db: db}
	}
	return &DB{Client: ent.NewClient(ent.Driver(drv)), SQL: db, pgReads: pgReads, Dialect: dialectName, raw: raw,
		url: url, directURL: o.directURL, pooler: pooler, writers: drv.writers, writes: drv.sqlite}, nil
}

// IsPostgresURL reports whether url names a Postgres server.
func IsPostgresURL(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// detectPooler connects once and reports whether a connection pooler
// stands between this process and the server. The server names its
// process in the BackendKeyData message of the start-up, and
// pg_backend_pid() names the process that runs the query: they are the
// same process when connected to the server itself. A pooler (PgBouncer,
// Odyssey, PgCat, RDS Proxy…) hands its clients a cancel key of its own,
// since a client's queries may run on any of its server connections.
func detectPooler(ctx context.Context, cc *pgx.ConnConfig) (bool, error) {
	c := cc.Copy()
	c.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol // nothing prepared
	conn, err := pgx.ConnectConfig(ctx, c)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid int64
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return false, err
	}
	return pid != int64(conn.PgConn().PID()), nil
}

// ThroughPooler reports whether the database URL leads to a connection
// pooler rather than to the Postgres server itself (see detectPooler).
func (d *DB) ThroughPooler() bool { return d.pooler }

// CanListen reports whether LISTEN has a session connection: on Postgres,
// reached directly or given a direct URL. Through a pooler without one, a
// LISTEN would run on whichever server connection the pooler lends and
// its notifications would reach nobody; Listen then does nothing and the
// callers poll.
func (d *DB) CanListen() bool {
	return d.Dialect == dialect.Postgres && (!d.pooler || d.directURL != "")
}

// sessionURL is the URL of a session connection: the direct URL when one
// was given, else the database URL.
func (d *DB) sessionURL() string { return cmp.Or(d.directURL, d.url) }

// DefaultMaxConns is the default size of the Postgres write pool
// (GATEHOUSE_DATABASE_MAX_CONNS). Transactions and writes share it: a
// commit waits for the WAL to reach the disk, and the more commits wait
// together, the more each flush carries (on 2 cores, ticket creation held
// 0.84 of its plain-INSERT floor with 40 connections, 0.64 with 8). The
// hot single-statement reads (Stmt) have a pool of their own, sized by
// CPU (DefaultReadConns): a read is CPU work only, and every connection
// is a server process competing for the same cores (on 2 cores, the
// signed order query used ~10 % less machine CPU per request through 8
// connections than through 40). docs/performance.md has the measurements.
const DefaultMaxConns = 40

// DefaultReadConns is the default size of the hot reads' pool
// (GATEHOUSE_DATABASE_READ_CONNS): 4 per CPU, at least 8, at most 32.
func DefaultReadConns() int { return min(max(4*runtime.GOMAXPROCS(0), 8), 32) }

// sqliteBusyTimeout is how long an SQLite writer waits for the write lock.
const sqliteBusyTimeout = 10 * time.Second

// Ping checks that the database answers.
func (d *DB) Ping(ctx context.Context) error { return d.SQL.PingContext(ctx) }

// Close closes the client and the pool.
func (d *DB) Close() error {
	if d.writes != nil {
		d.writes.close()
	}
	err := d.Client.Close()
	if d.pgReads != nil {
		d.pgReads.Close()
	}
	return err
}

// WithTx runs fn in a transaction, rolling back on error or panic.
func WithTx(ctx context.Context, client *ent.Client, fn func(tx *ent.Tx) error) (err error) {
	tx, err := client.Tx(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if v := recover(); v != nil {
			_ = tx.Rollback()
			panic(v)
		}
	}()
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			err = fmt.Errorf("%w (rollback: %v)", err, rerr)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// ClockOffset estimates how far the database server's clock is ahead of
// this process's (negative: behind) from one round trip, to within half
// of it; zero on SQLite, which uses this process's clock. Single writes
// and deductions on Postgres compare their request's deadline with the
// server's clock (see autocommit.go), so the two must agree.
func (db *DB) ClockOffset(ctx context.Context) (time.Duration, error) {
	if db.Dialect != dialect.Postgres {
		return 0, nil
	}
	before := time.Now()
	var server time.Time
	if err := db.SQL.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&server); err != nil {
		return 0, classify(err)
	}
	after := time.Now()
	return server.Sub(before.Add(after.Sub(before) / 2)), nil
}
