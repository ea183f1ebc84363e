package httpx

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRequestIDAndClientShareOneValue checks that the request id and the
// caller's address are both readable whatever the order of the two
// middlewares (they share one context value), and that a well-formed
// X-Request-Id is kept and echoed.
func TestRequestIDAndClientShareOneValue(t *testing.T) {
	proxy := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	var gotID, gotAddr string
	end := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		gotID, gotAddr = GetRequestID(r.Context()), ClientAddr(r)
	})
	chains := map[string]http.Handler{
		"RequestID, Client": RequestID(Client(proxy)(end)),
		"Client, RequestID": Client(proxy)(RequestID(end)),
		"Client only":       Client(proxy)(end),
	}
	for name, h := range chains {
		gotID, gotAddr = "", ""
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "127.0.0.1:5000"
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		req.Header.Set("X-Request-ID", "abc-123")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if gotAddr != "203.0.113.7" {
			t.Errorf("%s: client address %q, want the forwarded 203.0.113.7", name, gotAddr)
		}
		wantID := "abc-123"
		if name == "Client only" {
			wantID = ""
		}
		if gotID != wantID {
			t.Errorf("%s: request id %q, want %q", name, gotID, wantID)
		}
		if wantID != "" && rec.Header().Get(HeaderRequestID) != wantID {
			t.Errorf("%s: echoed request id %q, want %q", name, rec.Header().Get(HeaderRequestID), wantID)
		}
	}
}

// TestRequestMetricsBoundMethods checks that made-up request methods (the
// client chooses them) share one OTHER series of the latency histogram,
// so that nobody can grow the metrics without bound, while the standard
// methods keep their own; the status label is the numeric code, as
// status=~"5.." expects (not "I'm a teapot").
func TestRequestMetricsBoundMethods(t *testing.T) {
	const listener = "test-methods"
	h := Logger(slog.New(slog.DiscardHandler), listener)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	for i := range 50 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(fmt.Sprintf("MADEUP%d", i), "/", nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPatch, "/", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPatch, "/", nil))

	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "gatehouse_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["listener"] == listener {
				counts[labels["method"]+" "+labels["status"]] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]uint64{"OTHER 418": 50, "PATCH 418": 2}
	if !maps.Equal(counts, want) {
		t.Fatalf("series of listener %q: %v, want %v", listener, counts, want)
	}
}
