package httpx

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestShedRefusalIsNoError: a 503 of load shedding (MarkShed) writes no
// request line (the shedding summarises them) but is counted as a 5xx;
// any other 503 stays an ERROR line.
func TestShedRefusalIsNoError(t *testing.T) {
	var logs bytes.Buffer
	h := RequestID(Logger(slog.New(slog.NewTextHandler(&logs, nil)), "test-shed")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/shed" {
			MarkShed(r.Context())
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})))
	fivexx := responsesTotal.WithLabelValues("test-shed", "5xx")
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/shed", nil))
	if logs.Len() != 0 || counterValue(t, fivexx) != 1 {
		t.Fatalf("shed refusal: line %q, 5xx %v; want no line and one 5xx", logs.String(), counterValue(t, fivexx))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/other", nil))
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("other 503: line %q, want an ERROR", logs.String())
	}
}
