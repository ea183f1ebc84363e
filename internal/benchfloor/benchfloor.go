// Package benchfloor holds the floors gatehouse's signed order query is
// measured against: minimal handlers doing only the I/O the query cannot
// avoid. The load harness (cmd/gatehouse-bench, make bench) serves them as
// processes of their own; the in-process benchmarks of package rest call
// them directly, so both measure against the very same floor.
package benchfloor

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"gatehouse/internal/store"
)

// OrderNo is the order every floor query asks for.
const OrderNo = "SO1001"

// OrderReply is a JSON reply shaped like the order query's.
func OrderReply(orderNo string, minor int64, status string) map[string]any {
	return map[string]any{
		"code": 200, "message": "success",
		"data":      map[string]any{"order_no": orderNo, "amount": json.Number(fmt.Sprintf("%d.%02d", minor/100, minor%100)), "status": status},
		"timestamp": time.Now().UnixMilli(), "request_id": "baseline",
	}
}

// WriteJSON writes v as the reply's JSON body.
func WriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

// OpenSQLiteOrders creates, at path, an orders table shaped like
// gatehouse's (the same columns and indexes) holding order OrderNo, with
// gatehouse's SQLite settings (sync: its GATEHOUSE_SQLITE_SYNC) and pool
// settings.
func OpenSQLiteOrders(ctx context.Context, path, sync string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", store.SQLiteDSN(path, sync))
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
		VALUES (?, 1, 9990, 'PAID', 'Bench Customer', '13800138000', 'bench@example.com', ?, ?) ON CONFLICT (order_no) DO NOTHING`, OrderNo, now, now); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// SQLiteOrderQuery is the embedded signed query's floor on db (see
// OpenSQLiteOrders): per request, the nonce set in an in-memory map (set
// if absent, as gatehouse's in-process store does; a seen one is 401) and
// one prepared SELECT of the order row, then the JSON reply.
func SQLiteOrderQuery(ctx context.Context, db *sql.DB) (http.HandlerFunc, error) {
	stmt, err := db.PrepareContext(ctx, `SELECT id, app_id, amount, status, customer_name, customer_phone, customer_email, create_time, pay_time FROM orders WHERE order_no = ?`)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	var (
		mu     sync.Mutex
		nonces = map[string]time.Time{}
	)
	return func(w http.ResponseWriter, r *http.Request) {
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
		WriteJSON(w, OrderReply(q.Get("order_no"), amount, status))
	}, nil
}

// RedisPGOrderQuery is the signed query's floor on Postgres + Redis: per
// request, one Redis SET NX of the nonce under prefix (a seen one is 401)
// and one Postgres SELECT of the order row (gatehouse's table and key),
// through the drivers and the access path gatehouse's hot read uses
// (go-redis; pgx's own pool, whose statement cache prepares the query once
// per connection), then the JSON reply.
func RedisPGOrderQuery(ctx context.Context, pool *pgxpool.Pool, rdb *redis.Client, prefix string) (http.HandlerFunc, error) {
	const query = `SELECT order_no, amount, status FROM orders WHERE order_no = $1`
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		ok, err := rdb.SetNX(r.Context(), prefix+q.Get("nonce"), 1, 5*time.Minute).Result()
		if err != nil || !ok {
			http.Error(w, "nonce", http.StatusUnauthorized)
			return
		}
		var no, status string
		var amount int64
		if err := pool.QueryRow(r.Context(), query, q.Get("order_no")).Scan(&no, &amount, &status); err != nil {
			http.Error(w, "order", http.StatusNotFound)
			return
		}
		WriteJSON(w, OrderReply(no, amount, status))
	}, nil
}
