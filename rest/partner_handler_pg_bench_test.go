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
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// BenchmarkSignedHandlerPostgres is BenchmarkSignedHandler on Postgres +
// Redis: gatehouse's public handler called directly, next to a floor
// handler doing what the load harness's Postgres floor does (one Redis
// SET NX, one prepared Postgres SELECT of the order row, a JSON reply).
// Both wait for the same two round trips, so the difference is gatehouse's
// own work per request.
//
//	go test -run '^$' -bench SignedHandlerPostgres -cpu 1 ./rest/
func BenchmarkSignedHandlerPostgres(b *testing.B) {
	be := testenv.Backend{Name: "postgres", RedisURL: testenv.RedisURL(b), KeyPrefix: testenv.KeyPrefix(b)}
	be.DatabaseURL = testenv.PostgresURL(b)
	cfg := apptest.Config(b, be)
	if err := cfg.Resolve(); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cfg.LogFormat = "json"
	cfg.LogLevel = "info"
	log, flush := cfg.NewLogger(f)
	defer flush()
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close(context.Background())
	lim := partner.MaxRateLimit
	pa, sec, err := a.Partners.Create(context.Background(), partner.CreateInput{AppName: "bench", RateLimit: &lim})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.Orders.Create(context.Background(), order.CreateInput{AppID: pa.ID, OrderNo: "SO1001", Amount: "99.90", Status: order.Paid}); err != nil {
		b.Fatal(err)
	}

	b.Run("floor", func(b *testing.B) {
		db, err := sql.Open("pgx", be.DatabaseURL)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		opt, err := redis.ParseURL(be.RedisURL)
		if err != nil {
			b.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		stmt, err := db.Prepare(`SELECT order_no, amount, status FROM orders WHERE order_no = $1`)
		if err != nil {
			b.Fatal(err)
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			ok, err := rdb.SetNX(r.Context(), be.KeyPrefix+"floor:"+q.Get("nonce"), 1, 5*time.Minute).Result()
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
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"code": 200, "message": "success", "data": map[string]any{"order_no": no, "amount": float64(amount) / 100, "status": status}, "timestamp": time.Now().UnixMilli()})
		})
		urls := make([]string, b.N)
		for i := range urls {
			urls[i] = "/q?order_no=SO1001&nonce=n" + strconv.Itoa(i) + "-" + testenv.RandomSuffix()
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", urls[i], nil))
			if rec.Code != 200 {
				b.Fatal(rec.Code)
			}
		}
	})
	b.Run("gatehouse", func(b *testing.B) {
		s := partnerclient.Signer{AppKey: pa.AppKey, AppSecret: sec.AppSecret}
		urls := make([]string, b.N)
		for i := range urls {
			urls[i], _ = s.SignURL("http://x/api/v1/orders/query?order_no=SO1001")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(ctx, "GET", urls[i], nil)
			req.RemoteAddr = "127.0.0.1:1234"
			a.Public.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatal(rec.Code, rec.Body.String())
			}
		}
	})
}
