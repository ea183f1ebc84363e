package httpx

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"gatehouse/internal/requestlog"
)

// BenchmarkRequestLogLine: the cost of the request line (none: below the
// level), through slog's handlers and through requestlog's short way.
func BenchmarkRequestLogLine(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"code":200}`)) })
	for _, tc := range []struct {
		name string
		log  *slog.Logger
	}{
		{"none", slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))},
		{"json", slog.New(slog.NewJSONHandler(io.Discard, nil))},
		{"text", slog.New(slog.NewTextHandler(io.Discard, nil))},
		{"requestlog-json", slog.New(requestlog.NewHandler(io.Discard, true, slog.LevelInfo))},
		{"requestlog-text", slog.New(requestlog.NewHandler(io.Discard, false, slog.LevelInfo))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := RequestID(Logger(tc.log, "public")(ok))
			r := httptest.NewRequest(http.MethodGet, "/api/v1/order/query?app_key=x&nonce=y", nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}
