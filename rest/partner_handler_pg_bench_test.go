package rest_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/testenv"
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
	a, signer := benchApp(b, be)

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
		serveEach(b, h, urls)
	})
	b.Run("gatehouse", func(b *testing.B) {
		urls := make([]string, b.N)
		for i := range urls {
			urls[i], _ = signer.SignURL("http://x/api/v1/orders/query?order_no=SO1001")
		}
		serveEach(b, a.Public, urls)
	})
}
