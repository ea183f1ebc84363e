package httpx

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestShedRefusalIsNoError: a 503 of load shedding (MarkShed) is logged
// at WARN — the process protecting itself, counted on its own — while any
// other 503 stays an ERROR.
func TestShedRefusalIsNoError(t *testing.T) {
	var logs bytes.Buffer
	h := RequestID(Logger(slog.New(slog.NewTextHandler(&logs, nil)), "test-shed")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/shed" {
			MarkShed(r.Context())
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})))
	for path, want := range map[string]string{"/shed": "level=WARN", "/other": "level=ERROR"} {
		logs.Reset()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
		if !strings.HasPrefix(strings.SplitN(logs.String(), " ", 2)[1], want) {
			t.Errorf("%s: line %q, want %s", path, logs.String(), want)
		}
	}
}
