package partnerapi_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"gatehouse/internal/benchfloor"
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
		pool, err := pgxpool.New(context.Background(), be.DatabaseURL)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		opt, err := redis.ParseURL(be.RedisURL)
		if err != nil {
			b.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		h, err := benchfloor.RedisPGOrderQuery(context.Background(), pool, rdb, be.KeyPrefix+"floor:")
		if err != nil {
			b.Fatal(err)
		}
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
