package rest_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// BenchmarkSignedHandler is the embedded signed v1 order query without the
// network: the public listener's handler called directly with pre-signed
// requests, next to a floor handler doing what the load harness's floor
// does (nonce in a map, one prepared SQLite SELECT of the order row, a JSON
// reply), both on one goroutine. Its ns/op and allocs/op are the
// in-process cost of a request, steadier than the harness's figures; the
// log goes to a file through the production log writer.
//
//	go test -run '^$' -bench SignedHandler -cpu 1 ./rest/
func BenchmarkSignedHandler(b *testing.B) {
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "f.db")+"?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate&_time_format=sqlite")
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
		for _, q := range []string{
			`CREATE TABLE IF NOT EXISTS orders (id integer PRIMARY KEY AUTOINCREMENT, order_no text NOT NULL, app_id integer NOT NULL, amount integer NOT NULL,
			status text NOT NULL, customer_name text NULL, customer_phone text NULL, customer_email text NULL, create_time datetime NOT NULL, pay_time datetime NULL)`,
			`CREATE UNIQUE INDEX IF NOT EXISTS orders_order_no_key ON orders (order_no)`,
		} {
			if _, err := db.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
		now := time.Now().UTC()
		if _, err := db.Exec(`INSERT INTO orders (order_no, app_id, amount, status, customer_name, customer_phone, customer_email, create_time, pay_time)
		VALUES (?, 1, 9990, 'PAID', 'Bench Customer', '13800138000', 'bench@example.com', ?, ?)`, "SO1001", now, now); err != nil {
			b.Fatal(err)
		}
		stmt, err := db.Prepare(`SELECT id, app_id, amount, status, customer_name, customer_phone, customer_email, create_time, pay_time FROM orders WHERE order_no = ?`)
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		nonces := map[string]time.Time{}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			now := time.Now()
			mu.Lock()
			_, seen := nonces[q.Get("nonce")]
			if !seen {
				nonces[q.Get("nonce")] = now.Add(5 * time.Minute)
			}
			mu.Unlock()
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
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"code": 200, "message": "success", "data": map[string]any{"order_no": "SO1001", "amount": float64(amount) / 100, "status": status}, "timestamp": time.Now().UnixMilli()})
		})
		urls := make([]string, b.N)
		for i := range urls {
			urls[i] = "/q?order_no=SO1001&nonce=n" + strconv.Itoa(i)
		}
		// net/http gives every request a cancellable context (the SQLite
		// driver then watches it during the query), as gatehouse's are.
		serveEach(b, h, urls)
	})
	b.Run("gatehouse", func(b *testing.B) {
		a, s := benchApp(b, testenv.Backend{Name: "sqlite"})
		urls := make([]string, b.N)
		for i := range urls {
			urls[i], _ = s.SignURL("http://x/api/v1/orders/query?order_no=SO1001")
		}
		serveEach(b, a.Public, urls)
	})
}

// benchApp starts gatehouse on backend be as the benchmarks measure it
// (JSON request logs at info to a file through the production log writer)
// with one partner app at the highest rate limit and its order SO1001, and
// returns it with the app's signer. Everything is closed when b ends.
func benchApp(b *testing.B, be testenv.Backend) (*app.App, partnerclient.Signer) {
	b.Helper()
	cfg := apptest.Config(b, be)
	if err := cfg.Resolve(); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	cfg.LogFormat = "json"
	cfg.LogLevel = "info"
	log, flush := cfg.NewLogger(f)
	b.Cleanup(flush)
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(context.Background()) })
	lim := partner.MaxRateLimit
	pa, sec, err := a.Partners.Create(context.Background(), partner.CreateInput{AppName: "bench", RateLimit: &lim})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.Orders.Create(context.Background(), order.CreateInput{AppID: pa.ID, OrderNo: "SO1001", Amount: "99.90", Status: order.Paid}); err != nil {
		b.Fatal(err)
	}
	return a, partnerclient.Signer{AppKey: pa.AppKey, AppSecret: sec.AppSecret}
}

// serveEach times h serving a GET of each of urls (at least b.N of them),
// one at a time, each expected to answer 200. Every request has a
// cancellable context, as net/http gives them (database drivers then
// watch it during a query).
func serveEach(b *testing.B, h http.Handler, urls []string) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, "GET", urls[i], nil)
		req.RemoteAddr = "127.0.0.1:1234"
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}
