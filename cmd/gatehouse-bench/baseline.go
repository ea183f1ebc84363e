package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, as gatehouse uses
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // the "sqlite" driver, as gatehouse uses
)

// runBaseline serves a baseline until ctx ends:
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
func runBaseline(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	mode := fs.String("mode", "bare", "bare or redis-pg")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	pgURL := fs.String("postgres", "", "redis-pg: database URL")
	redisURL := fs.String("redis", "", "redis-pg: Redis URL")
	prefix := fs.String("prefix", "bench-baseline:", "redis-pg: key prefix")
	sqlitePath := fs.String("sqlite", "", "update-sqlite, insert-sqlite, sqlite-select: database file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, map[string]string{"status": "ok"}) })
	switch *mode {
	case "bare":
		mux.HandleFunc("GET /q", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, orderReply(r.URL.Query().Get("order_no"), 9990, "PAID"))
		})
	case "redis-pg":
		db, err := sql.Open("pgx", *pgURL)
		if err != nil {
			return err
		}
		defer db.Close()
		db.SetMaxOpenConns(32)
		db.SetMaxIdleConns(32)
		opt, err := redis.ParseURL(*redisURL)
		if err != nil {
			return err
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		stmt, err := db.PrepareContext(ctx, `SELECT order_no, amount, status FROM orders WHERE order_no = $1`)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		mux.HandleFunc("GET /q", func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			ok, err := rdb.SetNX(r.Context(), *prefix+q.Get("nonce"), 1, 5*time.Minute).Result()
			if err != nil || !ok {
				http.Error(w, "nonce", http.StatusUnauthorized)
				return
			}
			var no, status string
			var amount int64
			if err := stmt.QueryRowContext(r.Context(), q.Get("order_no")).Scan(&no, &amount, &status); err != nil {
				http.Error(w, "order", http.StatusNotFound)
				return
			}
			writeJSON(w, orderReply(no, amount, status))
		})
	case "sqlite-select":
		// The embedded signed query's floor: the nonce remembered in
		// memory (set if absent, as gatehouse's in-process store does) and
		// one prepared SELECT of the order row on SQLite with gatehouse's
		// settings.
		db, err := openSelectBaseline(ctx, *sqlitePath)
		if err != nil {
			return err
		}
		defer db.Close()
		stmt, err := db.PrepareContext(ctx, `SELECT id, app_id, amount, status, customer_name, customer_phone, customer_email, create_time, pay_time FROM orders WHERE order_no = ?`)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		var (
			mu     sync.Mutex
			nonces = map[string]time.Time{}
		)
		mux.HandleFunc("GET /q", func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			now := time.Now()
			mu.Lock()
			_, seen := nonces[q.Get("nonce")]
			if !seen {
				nonces[q.Get("nonce")] = now.Add(5 * time.Minute)
			}
			mu.Unlock()
			if seen {
				http.Error(w, "nonce", http.StatusUnauthorized)
				return
			}
			var (
				id, appID, amount   int64
				status              string
				name, phone, email  sql.NullString
				createTime, payTime sql.NullTime
			)
			if err := stmt.QueryRowContext(r.Context(), q.Get("order_no")).Scan(&id, &appID, &amount, &status, &name, &phone, &email, &createTime, &payTime); err != nil {
				http.Error(w, "order", http.StatusNotFound)
				return
			}
			writeJSON(w, orderReply(q.Get("order_no"), amount, status))
		})
	case "update-sqlite", "update-pg":
		db, err := openUpdateBaseline(ctx, *mode, *sqlitePath, *pgURL)
		if err != nil {
			return err
		}
		defer db.Close()
		mux.HandleFunc("POST /d", func(w http.ResponseWriter, r *http.Request) {
			res, err := db.ExecContext(r.Context(), rebind(*mode, `UPDATE bench_skus SET stock = stock - 1 WHERE id = ? AND stock >= 1`), r.URL.Query().Get("sku_id"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if n, _ := res.RowsAffected(); n != 1 {
				http.Error(w, "insufficient stock", http.StatusConflict)
				return
			}
			writeJSON(w, map[string]any{"code": 200, "message": "success"})
		})
	case "insert-sqlite", "insert-pg":
		closeDB, err := serveTicketFloor(ctx, mux, *mode, *sqlitePath, *pgURL)
		if err != nil {
			return err
		}
		defer closeDB()
	default:
		return fmt.Errorf("unknown baseline mode %q", *mode)
	}
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

func orderReply(orderNo string, minor int64, status string) map[string]any {
	return map[string]any{
		"code": 200, "message": "success",
		"data":      map[string]any{"order_no": orderNo, "amount": json.Number(fmt.Sprintf("%d.%02d", minor/100, minor%100)), "status": status},
		"timestamp": time.Now().UnixMilli(), "request_id": "baseline",
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

// sqliteDSN opens path with gatehouse's SQLite settings.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate&_time_format=sqlite"
}

// openSelectBaseline creates an orders table shaped like gatehouse's (the
// same columns and unique index) holding the order every query asks for,
// with gatehouse's pool settings.
func openSelectBaseline(ctx context.Context, path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS orders (id integer PRIMARY KEY AUTOINCREMENT, order_no text NOT NULL, app_id integer NOT NULL, amount integer NOT NULL,
			status text NOT NULL, customer_name text NULL, customer_phone text NULL, customer_email text NULL, create_time datetime NOT NULL, pay_time datetime NULL)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS orders_order_no_key ON orders (order_no)`,
		`CREATE INDEX IF NOT EXISTS order_app_id ON orders (app_id)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, err
		}
	}
	now := time.Now().UTC()
	if _, err := db.ExecContext(ctx, `INSERT INTO orders (order_no, app_id, amount, status, customer_name, customer_phone, customer_email, create_time, pay_time)
		VALUES (?, 1, 9990, 'PAID', 'Bench Customer', '13800138000', 'bench@example.com', ?, ?) ON CONFLICT (order_no) DO NOTHING`, orderNo, now, now); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// benchSKUs is how many rows the update baselines hold (ids 1..benchSKUs).
const benchSKUs = 100

// openUpdateBaseline opens the baseline's own table of stock rows, on
// SQLite with gatehouse's settings or on Postgres.
func openUpdateBaseline(ctx context.Context, mode, sqlitePath, pgURL string) (*sql.DB, error) {
	var db *sql.DB
	var err error
	if mode == "update-sqlite" {
		db, err = sql.Open("sqlite", "file:"+sqlitePath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
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
	for id := 1; id <= benchSKUs; id++ {
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
