package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/alexedwards/scs/v2"

	"gatehouse/internal/ui"
)

// TestFormCSRFWithoutSession: a browser without a session gets its form
// token in a cookie of its own and nothing in the session store; a form
// cookie that FormCSRF did not make (the wrong length, not base64url:
// markup, say) is neither echoed nor accepted, and is replaced; a POST
// passes the guard only with the cookie's own token.
func TestFormCSRFWithoutSession(t *testing.T) {
	sm := scs.New()
	sm.Cookie.Name, sm.Cookie.Path = "t", "/t/"
	s := ui.NewSessions(sm)
	var token string
	h := sm.LoadAndSave(s.Guard(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				token = s.FormCSRF(w, r)
			}
		})))
	get := func(cookie string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/t/page", nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "t_form", Value: cookie})
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	post := func(cookie, field string) int {
		req := httptest.NewRequest("POST", "/t/page", strings.NewReader(url.Values{ui.CSRFField: {field}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "t_form", Value: cookie})
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}

	w := get("")
	set := w.Header().Values("Set-Cookie")
	if len(set) != 1 || !strings.HasPrefix(set[0], "t_form="+token+";") || !strings.Contains(set[0], "HttpOnly") || !strings.Contains(set[0], "Path=/t/") {
		t.Fatalf("first page: token %q, Set-Cookie %q (no session cookie expected)", token, set)
	}
	first := token
	if w := get(first); token != first || len(w.Header().Values("Set-Cookie")) != 0 {
		t.Fatalf("second page: token %q (want %q), Set-Cookie %q", token, first, w.Header().Values("Set-Cookie"))
	}
	for _, bad := range []string{`"><script>alert(1)</script>`, first[:20], first + "x"} {
		if get(bad); token == bad || len(token) != len(first) {
			t.Fatalf("form cookie %q: token %q", bad, token)
		}
		if code := post(bad, bad); code != http.StatusForbidden {
			t.Fatalf("POST with the malformed cookie %q echoed: %d", bad, code)
		}
	}
	if code := post(first, first); code != http.StatusOK {
		t.Fatalf("POST with the cookie's token: %d", code)
	}
	if code := post(first, token); token != first && code != http.StatusForbidden {
		t.Fatalf("POST with another cookie's token: %d", code)
	}
	if code := post("", first); code != http.StatusForbidden {
		t.Fatalf("POST with the token but no cookie: %d", code)
	}
}
