package httpx

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
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
