// Package floor holds the floors gatehouse is measured against, each the
// least a server must do for the same work, run as child processes of
// the harness: `gatehouse-bench baseline …` serves one until stopped,
// `gatehouse-bench floor …` drains webhook messages to the sink and exits.
package floor

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, as gatehouse uses
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // the "sqlite" driver, as gatehouse uses

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/internal/benchfloor"
)

// RunBaseline serves a baseline until ctx ends:
//
//	bare:     a JSON reply shaped like the order query's, nothing else;
//	redis-pg: per request, one Redis SET NX (the nonce) and one Postgres
//	          SELECT of the order (the same table and key gatehouse reads),
//	          then the same JSON reply;
//	update-sqlite, update-pg: one conditional single-row UPDATE;
//	insert-sqlite, insert-pg: one INSERT of a ticket row (tickets.go);
//	sqlite-select: per request, the nonce set in an in-memory map and one
//	          prepared SELECT of the order row on SQLite (gatehouse's
//	          settings and columns), then the same JSON reply.
func RunBaseline(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	var f baselineFlags
	fs.StringVar(&f.mode, "mode", "bare", "bare or redis-pg")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	fs.StringVar(&f.pgURL, "postgres", "", "redis-pg: database URL")
	fs.StringVar(&f.redisURL, "redis", "", "redis-pg: Redis URL")
	fs.StringVar(&f.prefix, "prefix", "bench-baseline:", "redis-pg: key prefix")
	fs.StringVar(&f.sqlitePath, "sqlite", "", "update-sqlite, insert-sqlite, sqlite-select: database file")
	fs.StringVar(&f.sqliteSync, "sqlite-sync", bench.DefaultSQLiteSync, "SQLite synchronous setting (gatehouse's GATEHOUSE_SQLITE_SYNC): full or normal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		benchfloor.WriteJSON(w, map[string]string{"status": "ok"})
	})
	closeAll, err := serveBaseline(ctx, mux, f)
	if err != nil {
		return err
	}
	defer closeAll()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// baselineFlags are the settings of one baseline process.
type baselineFlags struct {
	mode, pgURL, redisURL, prefix, sqlitePath, sqliteSync string
}

// serveBaseline adds the handler of f.mode to mux and returns what closes
// its connections.
func serveBaseline(ctx context.Context, mux *http.ServeMux, f baselineFlags) (closeAll func(), err error) {
	switch f.mode {
	case "bare":
		mux.HandleFunc("GET /q", func(w http.ResponseWriter, r *http.Request) {
			benchfloor.WriteJSON(w, benchfloor.OrderReply(r.URL.Query().Get("order_no"), 9990, "PAID"))
		})
		return func() {}, nil
	case "redis-pg":
		return serveRedisPG(ctx, mux, f)
	case "sqlite-select":
		// The embedded signed query's floor: the nonce remembered in
		// memory (set if absent, as gatehouse's in-process store does) and
		// one prepared SELECT of the order row on SQLite with gatehouse's
		// settings.
		db, err := benchfloor.OpenSQLiteOrders(ctx, f.sqlitePath, f.sqliteSync)
		if err != nil {
			return nil, err
		}
		h, err := benchfloor.SQLiteOrderQuery(ctx, db)
		if err != nil {
			db.Close()
			return nil, err
		}
		mux.HandleFunc("GET /q", h)
		return func() { db.Close() }, nil
	case "update-sqlite", "update-pg":
		return serveUpdate(ctx, mux, f)
	case "publish-pg":
		closeDB, err := servePublishFloor(ctx, mux, f.pgURL)
		return func() { closeDB() }, err
	case "insert-sqlite", "insert-pg":
		closeDB, err := serveTicketFloor(ctx, mux, f.mode, f.sqlitePath, f.sqliteSync, f.pgURL)
		return func() { closeDB() }, err
	}
	return nil, fmt.Errorf("unknown baseline mode %q", f.mode)
}

// serveRedisPG adds the one-Redis-one-Postgres floor of the signed query.
func serveRedisPG(ctx context.Context, mux *http.ServeMux, f baselineFlags) (func(), error) {
	cfg, err := pgxpool.ParseConfig(f.pgURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opt, err := redis.ParseURL(f.redisURL)
	if err != nil {
		pool.Close()
		return nil, err
	}
	rdb := redis.NewClient(opt)
	closeAll := func() {
		rdb.Close()
		pool.Close()
	}
	h, err := benchfloor.RedisPGOrderQuery(ctx, pool, rdb, f.prefix)
	if err != nil {
		closeAll()
		return nil, err
	}
	mux.HandleFunc("GET /q", h)
	return closeAll, nil
}

// serveUpdate adds the floor of the deductions: one conditional
// single-row UPDATE per request.
func serveUpdate(ctx context.Context, mux *http.ServeMux, f baselineFlags) (func(), error) {
	db, err := openUpdateBaseline(ctx, f.mode, f.sqlitePath, f.sqliteSync, f.pgURL)
	if err != nil {
		return nil, err
	}
	mux.HandleFunc("POST /d", func(w http.ResponseWriter, r *http.Request) {
		res, err := db.ExecContext(r.Context(), rebind(f.mode, `UPDATE bench_skus SET stock = stock - 1 WHERE id = ? AND stock >= 1`), r.URL.Query().Get("sku_id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if n, _ := res.RowsAffected(); n != 1 {
			http.Error(w, "insufficient stock", http.StatusConflict)
			return
		}
		benchfloor.WriteJSON(w, map[string]any{"code": 200, "message": "success"})
	})
	return func() { db.Close() }, nil
}

// SKUs is how many rows the update baselines hold (ids 1..SKUs).
const SKUs = 100

// openUpdateBaseline opens the baseline's own table of stock rows, on
// SQLite with gatehouse's settings or on Postgres.
func openUpdateBaseline(ctx context.Context, mode, sqlitePath, sqliteSync, pgURL string) (*sql.DB, error) {
	var db *sql.DB
	var err error
	if mode == "update-sqlite" {
		db, err = sql.Open("sqlite", "file:"+sqlitePath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous("+strings.ToUpper(sqliteSync)+")")
		if err == nil {
			db.SetMaxOpenConns(8)
		}
	} else {
		db, err = sql.Open("pgx", pgURL)
		if err == nil {
			db.SetMaxOpenConns(40)
			db.SetMaxIdleConns(20)
		}
	}
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_skus (id INTEGER PRIMARY KEY, stock BIGINT NOT NULL)`); err != nil {
		db.Close()
		return nil, err
	}
	for id := 1; id <= SKUs; id++ {
		if _, err := db.ExecContext(ctx, rebind(mode, `INSERT INTO bench_skus (id, stock) VALUES (?, 1000000000) ON CONFLICT (id) DO NOTHING`), id); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// rebind turns ? placeholders into $n for Postgres.
func rebind(mode, q string) string {
	if mode != "update-pg" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
