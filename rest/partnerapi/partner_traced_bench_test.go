package partnerapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"gatehouse/internal/config"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/testenv"
)

// BenchmarkSignedHandlerPostgresTraced is BenchmarkSignedHandlerPostgres's
// gatehouse with tracing on as an operator turns it on (the OTEL_*
// variables: an OTLP/HTTP endpoint, every request sampled), exporting to
// a collector that discards: the difference to the untraced figure is
// what the spans cost (making, batching, encoding, sending).
//
//	go test -run '^$' -bench 'SignedHandlerPostgres' -cpu 1 ./rest/
func BenchmarkSignedHandlerPostgresTraced(b *testing.B) {
	be := testenv.Backend{Name: "postgres", RedisURL: testenv.RedisURL(b), KeyPrefix: testenv.KeyPrefix(b)}
	be.DatabaseURL = testenv.PostgresURL(b)
	benchTraced(b, be)
}

// BenchmarkSignedHandlerTraced is the same embedded (SQLite + memory).
func BenchmarkSignedHandlerTraced(b *testing.B) { benchTraced(b, testenv.Backend{Name: "sqlite"}) }

func benchTraced(b *testing.B, be testenv.Backend) {
	var received atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
	b.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	// On one core the batch processor's export goroutine falls behind the
	// loop, and a full queue (2048 by default) drops spans, which would
	// make tracing look cheaper than it is: the queue holds them all.
	b.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", strconv.Itoa(2*b.N+2048))
	tr, err := telemetry.FromEnv(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	a, signer := benchApp(b, be, func(c *config.Config) { c.Tracing = tr })
	urls := make([]string, b.N)
	for i := range urls {
		urls[i], _ = signer.SignURL("http://x/api/v1/orders/query?order_no=SO1001")
	}
	b.ResetTimer()
	// The spans still queued are exported inside the timing (their
	// encoding and sending are part of the cost); the OTLP bytes per call
	// show that every span got through.
	serveEach(b, a.Public, urls, func() {
		if err := tr.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(float64(received.Load())/float64(b.N), "otlp-B/op")
}
