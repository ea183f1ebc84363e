package partnerapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/benchfloor"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/store"
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
		db, err := benchfloor.OpenSQLiteOrders(context.Background(), filepath.Join(b.TempDir(), "f.db"), store.SQLiteSyncFull)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		h, err := benchfloor.SQLiteOrderQuery(context.Background(), db)
		if err != nil {
			b.Fatal(err)
		}
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
func benchApp(b *testing.B, be testenv.Backend, opts ...apptest.Option) (*app.App, partnerclient.Signer) {
	b.Helper()
	cfg := apptest.Config(b, be)
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.Resolve(); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	cfg.Log.Format = "json"
	cfg.Log.Level = "info"
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
// watch it during a query). then, if given, runs inside the timing after
// the last request. Besides the wall time it reports the process's CPU
// time per call (cpu-ns/op: user and system, every goroutine), which a
// machine shared with other work disturbs less.
func serveEach(b *testing.B, h http.Handler, urls []string, then ...func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, "GET", urls[i], nil)
		req.RemoteAddr = "127.0.0.1:1234"
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
	for _, f := range then {
		f()
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
