package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/ticket"
)

// serve runs one request through the public handler in memory.
func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// errorBody decodes a {"error", ...} body, failing unless every key is in keys.
func errorBody(t *testing.T, rec *httptest.ResponseRecorder, keys ...string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("HTTP %d: body is not JSON: %v %q", rec.Code, err, rec.Body.Bytes())
	}
	for k := range m {
		if !strings.Contains(" "+strings.Join(keys, " ")+" ", " "+k+" ") {
			t.Fatalf("HTTP %d: unexpected key %q in %s", rec.Code, k, rec.Body.Bytes())
		}
	}
	code, _ := m["error"].(string)
	if code == "" {
		t.Fatalf("HTTP %d: no error code in %s", rec.Code, rec.Body.Bytes())
	}
	return code
}

// FuzzTicketCreate sends arbitrary bodies and Content-Types to
// POST /api/tickets: the reply is 201 with a ticket whose title obeys the
// rules (trimmed, 1–200 characters, no control, bidirectional or invisible
// format characters), or a
// 400/413/415 in the error shape; never a 5xx or a panic.
func FuzzTicketCreate(f *testing.F) {
	e := apptest.Start(f, testenv.Backend{Name: "sqlite"})
	for _, s := range []struct{ ct, body string }{
		{"application/json", `{"title":"Printer on 3F jams"}`},
		{"application/json", `{"title":"  padded  "}`},
		{"application/json", `{"title":"a\u0000b"}`},
		{"application/json", `{"title":"invoice\u202Efdp.exe"}`},
		{"application/json", `{"title":123}`},
		{"application/json", `{"title":"\xff\xfe"}`},
		{"application/json", `[{"title":"x"}]`},
		{"application/json", `{"title":"x"}{}`},
		{"", `{"title":"no content type"}`},
		{"application/x-www-form-urlencoded", `{"title":"curl -d"}`},
		{"application/merge-patch+json", `{"title":"plus json"}`},
		{"text/plain", `{"title":"x"}`},
		{"application/json; charset=utf-8", `{"title":"` + strings.Repeat("é", 200) + `"}`},
	} {
		f.Add(s.ct, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		req := httptest.NewRequest("POST", "/api/tickets", strings.NewReader(string(body)))
		if ct != "" {
			req.Header["Content-Type"] = []string{ct}
		}
		rec := serve(e.App.Public, req)
		switch rec.Code {
		case http.StatusCreated:
			var tk struct {
				ID     int    `json:"id"`
				Title  string `json:"title"`
				Status string `json:"status"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &tk); err != nil {
				t.Fatalf("201 body: %v", err)
			}
			n := utf8.RuneCountInString(tk.Title)
			if tk.ID <= 0 || tk.Status != "OPEN" || n < 1 || n > 200 || !utf8.ValidString(tk.Title) ||
				strings.TrimFunc(tk.Title, unicode.IsSpace) != tk.Title || strings.IndexFunc(tk.Title, unicode.IsControl) >= 0 ||
				strings.IndexFunc(tk.Title, func(r rune) bool { return ticket.RefusedRune(r) != "" }) >= 0 {
				t.Fatalf("created a ticket that breaks the title rule: %q from %q", rec.Body.Bytes(), body)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			code := errorBody(t, rec, "error", "message")
			want := map[int][]string{400: {"invalid_json", "validation_failed"}, 413: {"payload_too_large"}, 415: {"unsupported_media_type"}}[rec.Code]
			if code != want[0] && (len(want) == 1 || code != want[1]) {
				t.Fatalf("HTTP %d with error %q", rec.Code, code)
			}
		default:
			t.Fatalf("HTTP %d for Content-Type %q body %q: %s", rec.Code, ct, body, rec.Body.Bytes())
		}
	})
}

// FuzzOAuthParameters sends arbitrary parameters to /oauth/authorize and
// /oauth/token (form and JSON): only the registered client and redirect
// URI start a flow, a made-up code never yields tokens, and every refusal
// is a 400/401 {"error": …} reply.
func FuzzOAuthParameters(f *testing.F) {
	e := apptest.Start(f, testenv.Backend{Name: "sqlite"})
	const redirect = "https://client.example/callback"
	app, sec, err := e.App.Partners.Create(context.Background(), partner.CreateInput{
		AppName: "fuzz client", RedirectURIs: []string{redirect}, Scopes: []string{"profile"},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(app.AppKey, redirect, "profile", "st", "authorization_code", "code", sec.AppSecret, "verifier", false)
	f.Add(app.AppKey, redirect+"?x=1", "profile admin", "", "refresh_token", "", sec.AppSecret, "", true)
	f.Add("", "", "", "", "", "", "", "", false)
	f.Add(app.AppKey+"\x00", "javascript:alert(1)", "\xff", "<script>", "password", "' OR 1=1 --", "x", "\r\n", true)
	f.Add(strings.ToUpper(app.AppKey), redirect+"/", "profile", "s", "client_credentials", "c", sec.AppSecret+" ", "v", false)
	f.Fuzz(func(t *testing.T, clientID, redirectURI, scope, state, grant, code, clientSecret, verifier string, asJSON bool) {
		q := url.Values{"client_id": {clientID}, "redirect_uri": {redirectURI}, "scope": {scope}, "state": {state}, "response_type": {"code"}}
		rec := serve(e.App.Public, httptest.NewRequest("GET", "/oauth/authorize?"+q.Encode(), nil))
		switch rec.Code {
		case http.StatusFound:
			if clientID != app.AppKey || redirectURI != redirect {
				t.Fatalf("authorize redirected for client %q redirect %q: %s", clientID, redirectURI, rec.Header().Get("Location"))
			}
		case http.StatusBadRequest:
			if c := errorBody(t, rec, "error", "error_description"); c != "invalid_client" && c != "invalid_request" && c != "invalid_scope" {
				t.Fatalf("authorize: error %q", c)
			}
		default:
			t.Fatalf("authorize: HTTP %d: %s", rec.Code, rec.Body.Bytes())
		}

		var req *http.Request
		if asJSON {
			b, _ := json.Marshal(map[string]string{"grant_type": grant, "code": code, "refresh_token": code, "client_id": clientID,
				"client_secret": clientSecret, "redirect_uri": redirectURI, "code_verifier": verifier})
			req = httptest.NewRequest("POST", "/oauth/token", strings.NewReader(string(b)))
			req.Header.Set("Content-Type", "application/json")
		} else {
			form := url.Values{"grant_type": {grant}, "code": {code}, "refresh_token": {code}, "client_id": {clientID},
				"client_secret": {clientSecret}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
			req = httptest.NewRequest("POST", "/oauth/token", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		rec = serve(e.App.Public, req)
		switch rec.Code {
		case http.StatusBadRequest, http.StatusUnauthorized:
			c := errorBody(t, rec, "error", "error_description")
			if rec.Code == http.StatusUnauthorized && c != "invalid_client" {
				t.Fatalf("token: 401 with %q", c)
			}
		default:
			t.Fatalf("token: HTTP %d for made-up parameters: %s", rec.Code, rec.Body.Bytes())
		}
	})
}
