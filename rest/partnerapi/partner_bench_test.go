package partnerapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// BenchmarkPartnerOrderQuery compares a signed v1 order query (parse,
// cached app lookup, MD5 verification, nonce + sliding window in one
// key-value call, usage count, order read, envelope) with a bare net/http
// handler writing a JSON object of the same size, both over loopback HTTP
// with the same client, measured in the same run. Each signed variant
// reports x-bare-throughput: its requests per second as a fraction of the
// bare handler's.
//
//	go test -run '^$' -bench PartnerOrderQuery ./rest/
func BenchmarkPartnerOrderQuery(b *testing.B) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"code": 200, "message": "success", "timestamp": 1763805600123, "request_id": "0123456789abcdef",
			"data": map[string]any{"order_no": r.URL.Query().Get("order_no"), "amount": 99.9, "status": "PAID"},
		})
	}))
	defer bare.Close()

	perOp := map[string]float64{}
	b.Run("bare", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if status, _, _, err := get(client, "GET", bare.URL+"/api/v1/orders/query?order_no=SO1001"); err != nil || status != 200 {
					b.Fatalf("bare: %d %v", status, err)
				}
			}
		})
		perOp["bare"] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	signed := func(name string, backend func(b *testing.B) testenv.Backend) {
		b.Run(name, func(b *testing.B) {
			e := apptest.Start(b, backend(b))
			lim := partner.MaxRateLimit
			app, sec, err := e.App.Partners.Create(context.Background(), partner.CreateInput{AppName: "bench", RateLimit: &lim})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.App.Orders.Create(context.Background(), order.CreateInput{AppID: app.ID, OrderNo: "SO1001", Amount: "99.90", Status: order.Paid}); err != nil {
				b.Fatal(err)
			}
			s := partnerclient.Signer{AppKey: app.AppKey, AppSecret: sec.AppSecret}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					u, err := s.SignURL(e.PublicURL + "/api/v1/orders/query?order_no=SO1001")
					if err != nil {
						b.Fatal(err)
					}
					if status, _, body, err := get(client, "GET", u); err != nil || status != 200 {
						b.Fatalf("signed: %d %v %s", status, err, body)
					}
				}
			})
			perOp[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if perOp["bare"] > 0 {
				// Throughput of the signed query as a fraction of the bare handler's.
				b.ReportMetric(perOp["bare"]/perOp[name], "x-bare-throughput")
			}
		})
	}
	signed("signed-sqlite-memory", func(*testing.B) testenv.Backend { return testenv.Backend{Name: "sqlite"} })
	signed("signed-postgres-redis", func(b *testing.B) testenv.Backend {
		return testenv.Backend{Name: "postgres", RedisURL: testenv.RedisURL(b), KeyPrefix: testenv.KeyPrefix(b), DatabaseURL: testenv.PostgresURL(b)}
	})
}
