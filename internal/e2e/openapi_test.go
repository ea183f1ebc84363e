package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerapi"
)

// specPath is docs/openapi.yaml, relative to this package.
const specPath = "../../docs/openapi.yaml"

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

// loadSpec parses and validates docs/openapi.yaml once and builds a router
// that finds the operation of a request.
func loadSpec(t testing.TB) routers.Router {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(specPath)
		if err != nil {
			specErr = fmt.Errorf("load %s: %w", specPath, err)
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			specErr = fmt.Errorf("%s is not a valid OpenAPI document: %w", specPath, err)
			return
		}
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		// Match any host: tests listen on random loopback ports.
		doc.Servers = openapi3.Servers{{URL: "/"}}
		specRouter, specErr = gorillamux.NewRouter(doc)
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return specRouter
}

// checker sends requests and validates every reply against the spec.
type checker struct {
	t      *testing.T
	router routers.Router
	f      *fixture
	seen   map[string]bool // "METHOD path status" validated
}

// do sends req with c (the fixture's client when nil), validates the reply
// against the operation the spec gives req, and fails unless the status is want.
func (c *checker) do(client *http.Client, req *http.Request, want int) resp {
	c.t.Helper()
	if client == nil {
		client = c.f.Client
	}
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	r := send(c.t, client, req)
	if r.status != want {
		c.t.Fatalf("%s %s: HTTP %d, want %d\n%s", req.Method, req.URL.Path, r.status, want, r.body)
	}
	if id := r.header.Get("X-Request-Id"); id == "" {
		c.t.Errorf("%s %s: no X-Request-Id", req.Method, req.URL.Path)
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("%s %s: no operation in the spec: %v", req.Method, req.URL.Path, err)
	}
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.status,
		Header:                 r.header,
		Body:                   io.NopCloser(bytes.NewReader(r.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		c.t.Errorf("%s %s → HTTP %d does not match docs/openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, r.status, err, r.body)
	}
	c.seen[req.Method+" "+route.Path+" "+strconv.Itoa(r.status)] = true
	return r
}

func (c *checker) req(method, path, body string, headers ...string) *http.Request {
	c.t.Helper()
	return newRequest(c.t, method, c.f.PublicURL+path, body, headers...)
}

// TestOpenAPIMatchesResponses drives every documented public endpoint with
// real requests and validates each reply (status, headers, body) against
// docs/openapi.yaml.
func TestOpenAPIMatchesResponses(t *testing.T) {
	router := loadSpec(t)
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		c := &checker{t: t, router: router, f: f, seen: map[string]bool{}}
		json := []string{"Content-Type", "application/json"}

		t.Run("health", func(t *testing.T) {
			c.t = t
			c.do(nil, c.req("GET", "/healthz", ""), 200)
			c.do(nil, c.req("GET", "/readyz", ""), 200)
		})

		t.Run("tickets", func(t *testing.T) {
			c.t = t
			created := c.do(nil, c.req("POST", "/api/tickets", `{"title":"  Printer on 3F jams "}`, json...), 201).object(t)
			id := strconv.Itoa(int(created["id"].(float64)))
			c.do(nil, c.req("POST", "/api/tickets", `{"title":"second"}`, json...), 201)
			c.do(nil, c.req("POST", "/api/tickets", `{"title":`, json...), 400)
			c.do(nil, c.req("POST", "/api/tickets", `{"title":""}`, json...), 400)
			c.do(nil, c.req("POST", "/api/tickets", `title=x`, "Content-Type", "text/plain"), 415)
			c.do(nil, c.req("POST", "/api/tickets", `{"title":"`+strings.Repeat("a", 70<<10)+`"}`, json...), 413)
			list := c.do(nil, c.req("GET", "/api/tickets?limit=1", ""), 200)
			if !strings.Contains(list.header.Get("Link"), `rel="next"`) {
				t.Errorf("no Link header on a partial page: %v", list.header)
			}
			c.do(nil, c.req("GET", "/api/tickets?status=OPEN", ""), 200)
			c.do(nil, c.req("GET", "/api/tickets?limit=0", ""), 400)
			c.do(nil, c.req("PATCH", "/api/tickets/"+id+"/status", `{"status":"DOING"}`, json...), 200)
			c.do(nil, c.req("PATCH", "/api/tickets/"+id+"/status", `{"status":"OPEN"}`, json...), 409)
			c.do(nil, c.req("PATCH", "/api/tickets/"+id+"/status", `{"status":"LATER"}`, json...), 400)
			c.do(nil, c.req("PATCH", "/api/tickets/999999/status", `{"status":"DOING"}`, json...), 404)
			c.do(nil, c.req("PATCH", "/api/tickets/abc/status", `{"status":"DOING"}`, json...), 404)
			c.do(nil, c.req("PATCH", "/api/tickets/"+id+"/status", `{"status":"DONE"}`, "Content-Type", "text/xml"), 415)
		})

		t.Run("orders", func(t *testing.T) {
			c.t = t
			for _, v := range partnerapi.PartnerVersionNames() {
				path := "/api/" + v + "/orders/query"
				c.do(nil, c.req("GET", f.signed(t, f.app.AppKey, f.secret, path, url.Values{"order_no": {"SO1001"}})[len(f.PublicURL):], ""), 200)
				c.do(nil, c.req("GET", f.signed(t, f.app.AppKey, f.secret, path, url.Values{"order_no": {"SO1002"}, "page": {"1"}, "page_size": {"20"}})[len(f.PublicURL):], ""), 200)
				c.do(nil, c.req("GET", f.signed(t, f.app.AppKey, f.secret, path, url.Values{"order_no": {"SO404"}})[len(f.PublicURL):], ""), 404)
				c.do(nil, c.req("GET", f.signed(t, f.app.AppKey, f.secret, path, url.Values{"order_no": {"SO2001"}})[len(f.PublicURL):], ""), 403)
				c.do(nil, c.req("GET", f.signed(t, f.app.AppKey, f.secret, path, url.Values{"order_no": {"SO1001"}, "page_size": {"101"}})[len(f.PublicURL):], ""), 400)
				c.do(nil, c.req("GET", f.signed(t, "no-such-app", f.secret, path, url.Values{"order_no": {"SO1001"}})[len(f.PublicURL):], ""), 401)
				c.do(nil, c.req("GET", f.signed(t, f.app.AppKey, "wrong-secret", path, url.Values{"order_no": {"SO1001"}})[len(f.PublicURL):], ""), 401)
				c.do(nil, c.req("GET", path+"?app_key="+f.app.AppKey+"&timestamp=1&nonce=n&sign=x&order_no=SO1001", ""), 401)
				replay := f.signed(t, f.app.AppKey, f.secret, path, url.Values{"order_no": {"SO1001"}})[len(f.PublicURL):]
				c.do(nil, c.req("GET", replay, ""), 200)
				c.do(nil, c.req("GET", replay, ""), 401)
				// The slow app allows one request per second: a burst of
				// three within a second has at least one 429.
				got429 := false
				for i := 0; i < 3 && !got429; i++ {
					r := send(t, f.Client, c.req("GET", f.signed(t, f.slow.AppKey, f.slowSec, path, url.Values{"order_no": {"SO3001"}})[len(f.PublicURL):], ""))
					if r.status == 429 {
						got429 = true
					}
				}
				if !got429 {
					t.Fatal("no 429 from an app limited to 1 request/s")
				}
				c.do(nil, c.req("GET", f.signed(t, f.slow.AppKey, f.slowSec, path, url.Values{"order_no": {"SO3001"}})[len(f.PublicURL):], ""), 429)
			}
		})

		t.Run("partner webhooks", func(t *testing.T) {
			c.t = t
			// call signs path with params and, for a body, its content_sha256.
			call := func(method, path string, params url.Values, body string, want int) resp {
				t.Helper()
				p := url.Values{}
				for k, v := range params {
					p[k] = v
				}
				var hd []string
				if body != "" {
					sum := sha256.Sum256([]byte(body))
					p.Set("content_sha256", hex.EncodeToString(sum[:]))
					hd = json
				}
				return c.do(nil, c.req(method, f.signed(t, f.app.AppKey, f.secret, path, p)[len(f.PublicURL):], body, hd...), want)
			}
			const base = "/api/v3/webhooks"
			created := call("POST", base+"/endpoints", nil, `{"url": "https://hooks.partner.example/in", "event_types": ["order.paid"]}`, 200).object(t)
			id := strconv.Itoa(int(created["data"].(map[string]any)["endpoint"].(map[string]any)["id"].(float64)))
			call("POST", base+"/endpoints", nil, `{"url": "ftp://x"}`, 400)
			call("GET", base+"/endpoints", nil, "", 200)
			call("GET", base+"/endpoints/"+id, nil, "", 200)
			call("GET", base+"/endpoints/999999", nil, "", 404)
			call("PATCH", base+"/endpoints/"+id, nil, `{"description": "orders", "rate_limit": null}`, 200)
			call("POST", base+"/endpoints/"+id+"/rotate-secret", nil, "", 200)
			call("GET", base+"/deliveries", url.Values{"status": {"FAILED"}, "limit": {"5"}}, "", 200)
			call("GET", base+"/deliveries", url.Values{"status": {"LOST"}}, "", 400)
			call("GET", base+"/deliveries/999999", nil, "", 404)
			call("POST", base+"/deliveries/999999/resend", nil, "", 404)
			call("POST", base+"/recover", url.Values{"since": {"2026-01-01T00:00:00Z"}}, "", 200)
			call("GET", base+"/event-types", nil, "", 200)
			call("GET", "/api/v3/usage", nil, "", 200)
			call("DELETE", base+"/endpoints/"+id, nil, "", 200)
			// A body changed after signing.
			sum := sha256.Sum256([]byte(`{"url": "https://hooks.partner.example/in"}`))
			u := f.signed(t, f.app.AppKey, f.secret, base+"/endpoints", url.Values{"content_sha256": {hex.EncodeToString(sum[:])}})
			c.do(nil, c.req("POST", u[len(f.PublicURL):], `{"url": "https://attacker.example/in"}`, json...), 401)
		})

		t.Run("deduct", func(t *testing.T) {
			c.t = t
			// Every version deducts with the same records: on the later
			// versions the biz_nos of the first are repeats.
			for i, v := range partnerapi.PartnerVersionNames() {
				path := "/api/" + v + "/inventory/deduct"
				deduct := func(key, sec, biz string, sku, qty int, want int) resp {
					t.Helper()
					u := f.signed(t, key, sec, path, url.Values{"biz_no": {biz}, "sku_id": {strconv.Itoa(sku)}, "quantity": {strconv.Itoa(qty)}})
					return c.do(nil, c.req("POST", u[len(f.PublicURL):], ""), want)
				}
				if r := deduct(f.app.AppKey, f.secret, "B-1", f.skuID, 2, 200); (r.header.Get("Idempotent-Replayed") == "true") != (i > 0) {
					t.Errorf("%s: first use of B-1 on version %d: %v", v, i+1, r.header)
				}
				if r := deduct(f.app.AppKey, f.secret, "B-1", f.skuID, 2, 200); r.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("replay without Idempotent-Replayed: %v", r.header)
				}
				deduct(f.app.AppKey, f.secret, "B-1", f.skuID, 3, 422)
				deduct(f.other.AppKey, f.otherSec, "B-1", f.skuID, 2, 403)
				deduct(f.app.AppKey, f.secret, "B-2", f.skuID, 1000, 409)
				deduct(f.app.AppKey, f.secret, "B-2", f.skuID, 1000, 409)
				if i == 0 {
					deduct(f.app.AppKey, f.secret, "B-3", 999999, 1, 400)
				} else {
					deduct(f.app.AppKey, f.secret, "B-3", 999999, 1, 409) // a repeat of a failure
				}
				deduct(f.app.AppKey, f.secret, "B-4", f.skuID, 0, 400)
				deduct("no-such-app", f.secret, "B-5", f.skuID, 1, 401)
			}
		})

		t.Run("login", func(t *testing.T) {
			c.t = t
			login := c.do(nil, c.req("POST", "/api/auth/login", `{"username":"`+userName+`","password":"`+userPassword+`"}`, json...), 200).object(t)
			tok := login["access_token"].(string)
			bearer := []string{"Authorization", "Bearer " + tok}
			c.do(nil, c.req("GET", "/api/auth/me", "", bearer...), 200)
			c.do(nil, c.req("GET", "/api/auth/me", ""), 401)
			c.do(nil, c.req("GET", "/api/auth/me", "", "Authorization", "Bearer not.a.jwt"), 401)
			c.do(nil, c.req("POST", "/auth/logout", "", bearer...), 200)
			c.do(nil, c.req("GET", "/api/auth/me", "", bearer...), 401)
			c.do(nil, c.req("POST", "/auth/logout", ""), 401)
			again := c.do(nil, c.req("POST", "/api/auth/login", `{"username":"`+userName+`","password":"`+userPassword+`"}`, json...), 200).object(t)
			c.do(nil, c.req("POST", "/api/auth/logout", "", "Authorization", "Bearer "+again["access_token"].(string)), 200)
			c.do(nil, c.req("POST", "/api/auth/logout", "", "Authorization", "Bearer "+again["access_token"].(string)), 401)
			c.do(nil, c.req("POST", "/api/auth/login", `{"username":"`+userName+`"}`, json...), 400)
			c.do(nil, c.req("POST", "/api/auth/login", `[`, json...), 400)
			c.do(nil, c.req("POST", "/api/auth/login", `{"username":"nobody-here","password":"wrong password"}`, json...), 401)
			var last resp
			for i := 0; i < 12 && last.status != 429; i++ {
				last = send(t, f.Client, c.req("POST", "/api/auth/login", `{"username":"throttled","password":"wrong password"}`, json...))
			}
			c.do(nil, c.req("POST", "/api/auth/login", `{"username":"throttled","password":"wrong password"}`, json...), 429)
		})

		t.Run("oauth", func(t *testing.T) {
			c.t = t
			br := browser(t)
			c.do(nil, c.req("GET", "/.well-known/oauth-authorization-server", ""), 200)
			authorize := "/oauth/authorize?" + url.Values{"client_id": {f.app.AppKey}, "redirect_uri": {f.redirect}, "response_type": {"code"},
				"scope": {"profile"}, "state": {"st-1"}}.Encode()
			id := pendingID(t, c.do(br, c.req("GET", authorize, ""), 302).header.Get("Location"))
			approve := "/oauth/approve?request_id=" + id
			c.do(br, c.req("GET", "/oauth/authorize?client_id=nope&redirect_uri=x", ""), 400)
			c.do(br, c.req("GET", "/oauth/authorize?client_id="+f.app.AppKey+"&redirect_uri=https://evil.example/cb", ""), 400)
			c.do(br, c.req("GET", "/login?next="+url.QueryEscape(approve), ""), 200)
			c.do(browser(t), c.req("GET", approve, ""), 400)
			c.do(br, c.req("POST", "/login", url.Values{"username": {userName}, "password": {"wrong password"}}.Encode(), form...), 401)
			c.do(br, c.req("POST", "/login", "username=x", append([]string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, form...)...), 403)
			c.do(br, c.req("POST", "/login", url.Values{"username": {userName}, "password": {userPassword}, "next": {approve}}.Encode(), form...), 302)
			c.do(br, c.req("GET", approve, ""), 200)
			conf := c.do(br, c.req("POST", "/oauth/confirm", "approved=true&request_id="+id, form...), 302)
			loc, err := url.Parse(conf.header.Get("Location"))
			if err != nil {
				t.Fatal(err)
			}
			code := loc.Query().Get("code")
			if code == "" {
				t.Fatalf("no code in %s", loc)
			}
			c.do(browser(t), c.req("POST", "/oauth/confirm", "approved=true&request_id="+id, form...), 400)

			tokenForm := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {f.app.AppKey},
				"client_secret": {f.secret}, "redirect_uri": {f.redirect}}
			c.do(nil, c.req("POST", "/oauth/token", tokenForm.Encode(), form...), 200)
			c.do(nil, c.req("POST", "/oauth/token", tokenForm.Encode(), form...), 400) // code reuse
			bad := url.Values{"grant_type": {"authorization_code"}, "code": {"nope"}, "client_id": {f.app.AppKey}, "client_secret": {"wrong"}}
			c.do(nil, c.req("POST", "/oauth/token", bad.Encode(), form...), 401)
			c.do(nil, c.req("POST", "/oauth/token", `{"grant_type":"password","client_id":"`+f.app.AppKey+`","client_secret":"`+f.secret+`"}`, json...), 400)
			c.do(nil, c.req("POST", "/oauth/token", `{"grant_type":"authorization_code","code":"nope","client_id":"`+f.app.AppKey+`","client_secret":"`+f.secret+`"}`, json...), 400)

			// The reuse above revoked the first pair; run the flow again.
			id = pendingID(t, c.do(br, c.req("GET", authorize, ""), 302).header.Get("Location"))
			conf = c.do(br, c.req("POST", "/oauth/confirm", "approved=true&request_id="+id, form...), 302)
			loc, _ = url.Parse(conf.header.Get("Location"))
			tokenForm.Set("code", loc.Query().Get("code"))
			tok := c.do(nil, c.req("POST", "/oauth/token", tokenForm.Encode(), form...), 200).object(t)
			access, refresh := tok["access_token"].(string), tok["refresh_token"].(string)
			c.do(nil, c.req("GET", "/oauth/userinfo", "", "Authorization", "Bearer "+access), 200)
			c.do(nil, c.req("POST", "/oauth/userinfo", "", "Authorization", "Bearer "+access), 200)
			c.do(nil, c.req("GET", "/oauth/userinfo", ""), 401)
			c.do(nil, c.req("GET", "/oauth/userinfo", "", "Authorization", "Bearer nope"), 401)
			clientAuth := url.Values{"client_id": {f.app.AppKey}, "client_secret": {f.secret}}
			in := url.Values{"token": {access}}
			for k, v := range clientAuth {
				in[k] = v
			}
			c.do(nil, c.req("POST", "/oauth/introspect", in.Encode(), form...), 200)
			c.do(nil, c.req("POST", "/oauth/introspect", "token="+access, form...), 401)
			rotated := c.do(nil, c.req("POST", "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh},
				"client_id": {f.app.AppKey}, "client_secret": {f.secret}}.Encode(), form...), 200).object(t)
			in.Set("token", rotated["access_token"].(string))
			c.do(nil, c.req("POST", "/oauth/revoke", in.Encode(), form...), 200)
			c.do(nil, c.req("POST", "/oauth/revoke", "token=x", form...), 401)
			c.do(nil, c.req("POST", "/oauth/revoke", clientAuth.Encode(), form...), 400)
			c.do(nil, c.req("POST", "/oauth/introspect", clientAuth.Encode()+"&token=a&token=b", form...), 400)
			c.do(nil, c.req("POST", "/oauth/introspect", `{"token":"x","client_id":"`+f.app.AppKey+`","client_secret":"`+f.secret+`"}`, json...), 200)
			id = pendingID(t, c.do(br, c.req("GET", authorize, ""), 302).header.Get("Location"))
			denied := url.Values{"approved": {"false"}, "request_id": {id}}
			c.do(br, c.req("POST", "/oauth/confirm", denied.Encode(), form...), 302)
		})
		c.t = t
		t.Logf("%d operation/status pairs validated", len(c.seen))
		if len(c.seen) < 55 {
			t.Errorf("only %d operation/status pairs validated", len(c.seen))
		}
	})
}

// TestOpenAPIListsEveryRoute: every method and path the public router
// serves is an operation of docs/openapi.yaml, and every operation there
// is served (catch-alls of the partner API and of unknown versions
// excepted: they answer 404/405 only; the portal's pages are a UI, not an
// API).
func TestOpenAPIListsEveryRoute(t *testing.T) {
	loadSpec(t)
	doc, err := openapi3.NewLoader().LoadFromFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	e := apptest.Start(t, testenv.Backend{Name: "sqlite"})
	served := map[string]bool{}
	var walk func(r chi.Routes, only string)
	walk = func(r chi.Routes, only string) {
		err := chi.Walk(r, func(method, route string, h http.Handler, _ ...func(http.Handler) http.Handler) error {
			route = strings.TrimSuffix(route, "/")
			if strings.ContainsAny(route, "*:") || route == "" {
				return nil
			}
			// The partner portal's pages are a browser UI for people
			// (docs/portal.md), like the admin console: partners' programs
			// call the signed API under /api/v3/webhooks/, which is here.
			if route == "/portal" || strings.HasPrefix(route, "/portal/") {
				return nil
			}
			if only != "" && route != only {
				return nil
			}
			// MountWhole hands whole paths to a router: its own routes say
			// which methods it serves.
			if sub, ok := h.(chi.Routes); ok && only == "" {
				walk(sub, route)
				return nil
			}
			served[method+" "+route] = true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	walk(e.App.Public.(chi.Routes), "")
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("%s is served but not in docs/openapi.yaml", r)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("docs/openapi.yaml has %s, which the server does not serve", r)
		}
	}
	if len(served) < 25 {
		t.Fatalf("only %d routes found: %v", len(served), served)
	}
}
