package e2e_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

// shape is the body a hostile request must get back.
type shape int

const (
	// ticketShape: {"error": code, "message": text}, exactly (tickets, and
	// every path outside the partner and auth families).
	ticketShape shape = iota
	// envelopeShape: the partner envelope without data, with the code.
	envelopeShape
	// authShape: {"error": code[, "error_description": text]}.
	authShape
	// protocolShape: refused by net/http itself before any handler ran
	// (malformed HTTP); any 4xx status, a plain-text body.
	protocolShape
)

// hostileCase is one hostile request and the reply it must get.
type hostileCase struct {
	name string
	// method, target (path and query) and body build the request; when raw
	// is set it is written to the connection as is instead ("{host}" is
	// replaced), for requests no HTTP client would send.
	method, target, body string
	headers              []string
	raw                  string
	halfClose            bool // raw: close the write side after sending
	admin                bool // to the admin listener
	chunked              bool // send the body without a Content-Length
	status               int
	shape                shape
	errCode              string // ticket/auth shapes: the "error" value
	code                 int    // envelope shape: the business code
}

var envelopeMeanings = map[int]string{
	4001: "invalid app key", 4002: "signature verification failed", 4003: "request expired",
	4004: "duplicate request", 429: "too many requests", 5001: "order does not exist",
	5002: "parameter validation failed", 5003: "no access to the resource", 6000: "system busy",
}

// hostileCases are built against fixture f (signed ones need its secrets).
func hostileCases(t *testing.T, f *fixture) []hostileCase {
	t.Helper()
	js := []string{"Content-Type", "application/json"}
	sign := func(path string, p url.Values) string {
		return strings.TrimPrefix(f.signed(t, f.app.AppKey, f.secret, path, p), f.PublicURL)
	}
	q := "/api/v1/orders/query"
	d := "/api/v1/inventory/deduct"
	// long fits under the server's 64 KiB header limit, so the handlers see
	// it; tooLong does not, and net/http refuses it before any handler (431).
	long := strings.Repeat("A", 60<<10)
	tooLong := strings.Repeat("A", 100<<10)
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	noneJWT := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1","username":"`+userName+`","roles":["admin"],"exp":9999999999}`)) + "."
	hs := func(key string) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
		p := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1","username":"` + userName + `","roles":["admin"],"iat":1,"exp":9999999999,"jti":"x"}`))
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(h + "." + p))
		return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	client := url.Values{"client_id": {f.app.AppKey}, "client_secret": {f.secret}}
	withClient := func(extra url.Values) string {
		v := url.Values{}
		for k, vs := range client {
			v[k] = vs
		}
		for k, vs := range extra {
			v[k] = vs
		}
		return v.Encode()
	}
	return []hostileCase{
		// Tickets: bodies.
		{name: "title number", method: "POST", target: "/api/tickets", body: `{"title":123}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "title null", method: "POST", target: "/api/tickets", body: `{"title":null}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "title array", method: "POST", target: "/api/tickets", body: `{"title":["a"]}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "title NoSQL operator", method: "POST", target: "/api/tickets", body: `{"title":{"$ne":""}}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "body JSON string", method: "POST", target: "/api/tickets", body: `"just a title"`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "body JSON array", method: "POST", target: "/api/tickets", body: `[{"title":"a"}]`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "two JSON values", method: "POST", target: "/api/tickets", body: `{"title":"a"}{"title":"b"}`, headers: js, status: 400, errCode: "invalid_json"},
		{name: "empty body", method: "POST", target: "/api/tickets", headers: js, status: 400, errCode: "invalid_json"},
		{name: "truncated JSON", method: "POST", target: "/api/tickets", body: `{"title":"x`, headers: js, status: 400, errCode: "invalid_json"},
		{name: "NUL in title", method: "POST", target: "/api/tickets", body: `{"title":"a\u0000b"}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "CRLF in title", method: "POST", target: "/api/tickets", body: `{"title":"a\r\nSet-Cookie: x=1"}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "bidi control in title", method: "POST", target: "/api/tickets", body: "{\"title\":\"a\u0085b\"}", headers: js, status: 400, errCode: "validation_failed"},
		{name: "title 201 chars", method: "POST", target: "/api/tickets", body: `{"title":"` + strings.Repeat("é", 201) + `"}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "title only spaces", method: "POST", target: "/api/tickets", body: `{"title":" \u3000\t "}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "duplicate key, last not a string", method: "POST", target: "/api/tickets", body: `{"title":"a","title":5}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "deeply nested JSON", method: "POST", target: "/api/tickets", body: `{"title":` + deep + `}`, headers: js, status: 413, errCode: "payload_too_large"},
		{name: "nesting over the decoder's depth limit", method: "POST", target: "/api/tickets", body: `{"title":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, headers: js, status: 400, errCode: "invalid_json"},
		{name: "body 65 KiB", method: "POST", target: "/api/tickets", body: `{"title":"` + strings.Repeat("a", 65<<10) + `"}`, headers: js, status: 413, errCode: "payload_too_large"},
		{name: "body 8 MiB", method: "POST", target: "/api/tickets", body: `{"title":"` + strings.Repeat("a", 8<<20) + `"}`, headers: js, status: 413, errCode: "payload_too_large"},
		{name: "text/plain body", method: "POST", target: "/api/tickets", body: `{"title":"a"}`, headers: []string{"Content-Type", "text/plain"}, status: 415, errCode: "unsupported_media_type"},
		{name: "xml body", method: "POST", target: "/api/tickets", body: `<title>a</title>`, headers: []string{"Content-Type", "application/xml"}, status: 415, errCode: "unsupported_media_type"},
		{name: "malformed Content-Type", method: "POST", target: "/api/tickets", body: `{"title":"a"}`, headers: []string{"Content-Type", "application/json; ;;=="}, status: 415, errCode: "unsupported_media_type"},
		{name: "status SQL injection", method: "PATCH", target: "/api/tickets/1/status", body: `{"status":"DOING'; DROP TABLE tickets;--"}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "status number", method: "PATCH", target: "/api/tickets/1/status", body: `{"status":1}`, headers: js, status: 400, errCode: "validation_failed"},
		{name: "status lower case", method: "PATCH", target: "/api/tickets/1/status", body: `{"status":"doing"}`, headers: js, status: 400, errCode: "validation_failed"},
		// Tickets: paths and queries.
		{name: "negative ticket id", method: "PATCH", target: "/api/tickets/-1/status", body: `{"status":"DOING"}`, headers: js, status: 404, errCode: "not_found"},
		{name: "ticket id overflows int64", method: "PATCH", target: "/api/tickets/99999999999999999999999/status", body: `{"status":"DOING"}`, headers: js, status: 404, errCode: "not_found"},
		{name: "ticket id encoded traversal", method: "PATCH", target: "/api/tickets/..%2f..%2fetc%2fpasswd/status", body: `{"status":"DOING"}`, headers: js, status: 404, errCode: "not_found"},
		{name: "limit not a number", method: "GET", target: "/api/tickets?limit=abc", status: 400, errCode: "validation_failed"},
		{name: "limit negative", method: "GET", target: "/api/tickets?limit=-1", status: 400, errCode: "validation_failed"},
		{name: "limit huge", method: "GET", target: "/api/tickets?limit=99999999999999999999", status: 400, errCode: "validation_failed"},
		{name: "limit twice", method: "GET", target: "/api/tickets?limit=1&limit=2", status: 400, errCode: "validation_failed"},
		{name: "status injection", method: "GET", target: "/api/tickets?status=OPEN%27%20OR%20%271%27%3D%271", status: 400, errCode: "validation_failed"},
		{name: "status invalid UTF-8", method: "GET", target: "/api/tickets?status=%ff%fe", status: 400, errCode: "validation_failed"},
		{name: "cursor garbage", method: "GET", target: "/api/tickets?cursor=%00%01garbage", status: 400, errCode: "validation_failed"},
		{name: "huge query string", method: "GET", target: "/api/tickets?status=" + long, status: 400, errCode: "validation_failed"},
		{name: "query string over the header limit", method: "GET", target: "/api/tickets?status=" + tooLong, status: 431, shape: protocolShape},
		{name: "header over the header limit", method: "GET", target: "/api/auth/me", headers: []string{"Authorization", "Bearer " + tooLong}, status: 431, shape: protocolShape},
		{name: "DELETE tickets", method: "DELETE", target: "/api/tickets", status: 405, errCode: "method_not_allowed"},
		{name: "made-up method", method: "BREW", target: "/api/tickets", status: 405, errCode: "method_not_allowed"},
		{name: "unknown path", method: "GET", target: "/api/nothing-here", status: 404, errCode: "not_found"},
		{name: "raw path traversal", raw: "GET /api/tickets/../../../etc/passwd HTTP/1.1\r\nHost: {host}\r\n\r\n", status: 404, errCode: "not_found"},
		{name: "encoded NUL in path", method: "GET", target: "/api/tickets/%00/status", status: 405, errCode: "method_not_allowed"},
		{name: "invalid UTF-8 in path", raw: "GET /api/\xff\xfe HTTP/1.1\r\nHost: {host}\r\n\r\n", status: 404, errCode: "not_found"},

		// Partner API: the checks before the signature.
		{name: "no signing parameters", method: "GET", target: q + "?order_no=SO1001", status: 401, shape: envelopeShape, code: 4001},
		{name: "app_key SQL injection", method: "GET", target: q + "?app_key=%27%20OR%201%3D1--&timestamp=1&nonce=n&sign=x", status: 401, shape: envelopeShape, code: 4001},
		{name: "app_key 60 KiB", method: "GET", target: q + "?app_key=" + long, status: 401, shape: envelopeShape, code: 4001},
		{name: "app_key twice", method: "GET", target: sign(q, url.Values{"order_no": {"SO1001"}}) + "&app_key=" + f.other.AppKey, status: 401, shape: envelopeShape, code: 4002},
		{name: "timestamp not a number", method: "GET", target: q + "?app_key=" + f.app.AppKey + "&timestamp=abc&nonce=n&sign=x", status: 401, shape: envelopeShape, code: 4003},
		{name: "timestamp negative", method: "GET", target: q + "?app_key=" + f.app.AppKey + "&timestamp=-1&nonce=n&sign=x", status: 401, shape: envelopeShape, code: 4003},
		{name: "timestamp overflows", method: "GET", target: q + "?app_key=" + f.app.AppKey + "&timestamp=99999999999999999999999&nonce=n&sign=x", status: 401, shape: envelopeShape, code: 4003},
		{name: "timestamp float", method: "GET", target: q + "?app_key=" + f.app.AppKey + "&timestamp=" + strconv.FormatInt(time.Now().UnixMilli(), 10) + ".5&nonce=n&sign=x", status: 401, shape: envelopeShape, code: 4003},
		{name: "nonce 65 characters", method: "GET", target: q + "?app_key=" + f.app.AppKey + "&timestamp=" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "&nonce=" + strings.Repeat("n", 65) + "&sign=x", status: 401, shape: envelopeShape, code: 4002},
		{name: "nonce empty", method: "GET", target: q + "?app_key=" + f.app.AppKey + "&timestamp=" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "&nonce=&sign=x", status: 401, shape: envelopeShape, code: 4002},
		{name: "sign missing", method: "GET", target: q + "?app_key=" + f.app.AppKey + "&timestamp=" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "&nonce=" + randomNonce() + "&order_no=SO1001", status: 401, shape: envelopeShape, code: 4002},
		{name: "sign given twice", method: "GET", target: sign(q, url.Values{"order_no": {"SO1001"}}) + "&sign=00", status: 401, shape: envelopeShape, code: 4002},
		{name: "order_no given twice", method: "GET", target: sign(q, url.Values{"order_no": {"SO1001"}}) + "&order_no=SO2001", status: 401, shape: envelopeShape, code: 4002},
		{name: "bad percent-encoding", method: "GET", target: sign(q, url.Values{"order_no": {"SO1001"}}) + "&x=%zz", status: 401, shape: envelopeShape, code: 4002},
		{name: "unknown sign_type", method: "GET", target: sign(q, url.Values{"order_no": {"SO1001"}}) + "&sign_type=SHA1", status: 401, shape: envelopeShape, code: 4002},
		// Partner API: signed, hostile business parameters.
		{name: "order_no with NUL", method: "GET", target: sign(q, url.Values{"order_no": {"SO\x001001"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "order_no invalid UTF-8", method: "GET", target: sign(q, url.Values{"order_no": {"SO\xff"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "order_no 65 characters", method: "GET", target: sign(q, url.Values{"order_no": {strings.Repeat("S", 65)}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "order_no empty", method: "GET", target: sign(q, url.Values{"order_no": {""}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "order_no SQL injection", method: "GET", target: sign(q, url.Values{"order_no": {"SO1001' OR '1'='1"}}), status: 404, shape: envelopeShape, code: 5001},
		{name: "page zero", method: "GET", target: sign(q, url.Values{"order_no": {"SO1001"}, "page": {"0"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "page_size not a number", method: "GET", target: sign("/api/v2/orders/query", url.Values{"order_no": {"SO1001"}, "page_size": {"1e2"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "page overflows", method: "GET", target: sign(q, url.Values{"order_no": {"SO1001"}, "page": {"99999999999999999999999"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "unknown version", method: "GET", target: "/api/v9/orders/query?order_no=SO1001", status: 404, shape: envelopeShape, code: 5002},
		{name: "unknown partner path", method: "GET", target: "/api/v1/orders/..%2f..%2fadmin", status: 404, shape: envelopeShape, code: 5002},
		{name: "POST to the order query", method: "POST", target: q + "?order_no=SO1001", status: 405, shape: envelopeShape, code: 5002},
		{name: "GET the deduction", method: "GET", target: d, status: 405, shape: envelopeShape, code: 5002},
		{name: "quantity zero", method: "POST", target: sign(d, url.Values{"biz_no": {"H-1"}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"0"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "quantity over a million", method: "POST", target: sign(d, url.Values{"biz_no": {"H-2"}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1000001"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "quantity fraction", method: "POST", target: sign(d, url.Values{"biz_no": {"H-3"}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1.5"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "sku_id negative", method: "POST", target: sign(d, url.Values{"biz_no": {"H-4"}, "sku_id": {"-1"}, "quantity": {"1"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "sku_id injection", method: "POST", target: sign(d, url.Values{"biz_no": {"H-5"}, "sku_id": {"1 OR 1=1"}, "quantity": {"1"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "biz_no 65 characters", method: "POST", target: sign(d, url.Values{"biz_no": {strings.Repeat("B", 65)}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "biz_no control character", method: "POST", target: sign(d, url.Values{"biz_no": {"B\x01"}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "biz_no non-ASCII", method: "POST", target: sign(d, url.Values{"biz_no": {"订单-1"}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}}), status: 400, shape: envelopeShape, code: 5002},
		{name: "biz_no missing", method: "POST", target: sign(d, url.Values{"sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}}), status: 400, shape: envelopeShape, code: 5002},

		// Signed user tokens.
		{name: "login with numbers", method: "POST", target: "/api/auth/login", body: `{"username":1,"password":2}`, headers: js, status: 400, shape: authShape, errCode: "invalid_request"},
		{name: "login not JSON", method: "POST", target: "/api/auth/login", body: `username=a&password=b`, headers: js, status: 400, shape: authShape, errCode: "invalid_request"},
		{name: "login 70 KiB with Content-Length", method: "POST", target: "/api/auth/login", body: `{"username":"` + strings.Repeat("u", 70<<10) + `","password":"x"}`, headers: js, status: 413, shape: authShape, errCode: "payload_too_large"},
		{name: "token 70 KiB form with Content-Length", method: "POST", target: "/oauth/token", body: "grant_type=" + strings.Repeat("a", 70<<10), headers: form, status: 413, shape: authShape, errCode: "payload_too_large"},
		{name: "deduct with a 70 KiB body", method: "POST", target: d + "?biz_no=x", body: strings.Repeat("a", 70<<10), headers: js, status: 413, shape: envelopeShape, code: 5002},
		{name: "login 70 KiB chunked", method: "POST", target: "/api/auth/login", body: `{"username":"` + strings.Repeat("u", 70<<10) + `","password":"x"}`, chunked: true, headers: js, status: 413, shape: authShape, errCode: "payload_too_large"},
		{name: "login SQL injection", method: "POST", target: "/api/auth/login", body: `{"username":"' OR 1=1 --","password":"' OR 1=1 --"}`, headers: js, status: 401, shape: authShape, errCode: "invalid_credentials"},
		{name: "login NUL in username", method: "POST", target: "/api/auth/login", body: `{"username":"` + userName + `\u0000","password":"` + userPassword + `"}`, headers: js, status: 400, shape: authShape, errCode: "invalid_request"},
		{name: "me with empty Bearer", method: "GET", target: "/api/auth/me", headers: []string{"Authorization", "Bearer "}, status: 401, shape: authShape, errCode: "missing_token"},
		{name: "me with Basic", method: "GET", target: "/api/auth/me", headers: []string{"Authorization", "Basic YTpi"}, status: 401, shape: authShape, errCode: "missing_token"},
		{name: "me with alg none", method: "GET", target: "/api/auth/me", headers: []string{"Authorization", "Bearer " + noneJWT}, status: 401, shape: authShape, errCode: "invalid_token"},
		{name: "me with a forged HS256", method: "GET", target: "/api/auth/me", headers: []string{"Authorization", "Bearer " + hs("not the server's key, but 32 bytes long!")}, status: 401, shape: authShape, errCode: "invalid_token"},
		{name: "me with a 60 KiB token", method: "GET", target: "/api/auth/me", headers: []string{"Authorization", "Bearer " + long}, status: 401, shape: authShape, errCode: "invalid_token"},
		{name: "logout with garbage", method: "POST", target: "/auth/logout", headers: []string{"Authorization", "Bearer a.b.c"}, status: 401, shape: authShape, errCode: "invalid_token"},

		// OAuth.
		{name: "authorize without parameters", method: "GET", target: "/oauth/authorize", status: 400, shape: authShape, errCode: "invalid_client"},
		{name: "authorize injected client_id", method: "GET", target: "/oauth/authorize?client_id=%3Cscript%3E&redirect_uri=x", status: 400, shape: authShape, errCode: "invalid_client"},
		{name: "authorize javascript: redirect", method: "GET", target: "/oauth/authorize?client_id=" + f.app.AppKey + "&redirect_uri=javascript:alert(1)", status: 400, shape: authShape, errCode: "invalid_request"},
		{name: "authorize CRLF in redirect", method: "GET", target: "/oauth/authorize?client_id=" + f.app.AppKey + "&redirect_uri=" + url.QueryEscape(f.redirect+"\r\nLocation: https://evil.example"), status: 400, shape: authShape, errCode: "invalid_request"},
		{name: "token wrong secret", method: "POST", target: "/oauth/token", body: url.Values{"grant_type": {"authorization_code"}, "code": {"x"}, "client_id": {f.app.AppKey}, "client_secret": {f.secret + "x"}}.Encode(), headers: form, status: 401, shape: authShape, errCode: "invalid_client"},
		{name: "token garbage Basic", method: "POST", target: "/oauth/token", body: "grant_type=authorization_code&code=x", headers: append([]string{"Authorization", "Basic !!!not-base64"}, form...), status: 401, shape: authShape, errCode: "invalid_client"},
		{name: "token password grant", method: "POST", target: "/oauth/token", body: withClient(url.Values{"grant_type": {"password"}, "username": {"a"}, "password": {"b"}}), headers: form, status: 400, shape: authShape, errCode: "unsupported_grant_type"},
		{name: "token injected code", method: "POST", target: "/oauth/token", body: withClient(url.Values{"grant_type": {"authorization_code"}, "code": {"' OR 1=1 --"}}), headers: form, status: 400, shape: authShape, errCode: "invalid_grant"},
		{name: "token malformed JSON", method: "POST", target: "/oauth/token", body: `{"grant_type":`, headers: js, status: 400, shape: authShape, errCode: "invalid_request"},
		{name: "token 70 KiB form chunked", method: "POST", target: "/oauth/token", body: "grant_type=" + strings.Repeat("a", 70<<10), chunked: true, headers: form, status: 413, shape: authShape, errCode: "payload_too_large"},
		{name: "userinfo non-Bearer", method: "GET", target: "/oauth/userinfo", headers: []string{"Authorization", "Token abc"}, status: 401, shape: authShape, errCode: "unauthorized"},
		{name: "userinfo forged token", method: "GET", target: "/oauth/userinfo", headers: []string{"Authorization", "Bearer " + long}, status: 401, shape: authShape, errCode: "invalid_token"},
		{name: "introspect without client", method: "POST", target: "/oauth/introspect", body: "token=x", headers: form, status: 401, shape: authShape, errCode: "invalid_client"},
		{name: "confirm cross-site", method: "POST", target: "/oauth/confirm", body: "approved=true", headers: append([]string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, form...), status: 403, shape: authShape, errCode: "forbidden"},

		// Admin listener.
		{name: "graphql without key", admin: true, method: "POST", target: "/graphql", body: `{"query":"{__typename}"}`, headers: js, status: 401, shape: authShape, errCode: "missing_api_key"},
		{name: "graphql unknown key", admin: true, method: "POST", target: "/graphql", body: `{"query":"{__typename}"}`, headers: append([]string{"X-API-Key", "' OR 1=1 --"}, js...), status: 401, shape: authShape, errCode: "invalid_api_key"},
		{name: "graphql 60 KiB key", admin: true, method: "POST", target: "/graphql", body: `{"query":"{__typename}"}`, headers: append([]string{"X-API-Key", long}, js...), status: 401, shape: authShape, errCode: "invalid_api_key"},

		// Malformed HTTP: net/http refuses these before any handler runs.
		{name: "two different Content-Lengths", raw: "POST /api/tickets HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 13\r\nContent-Length: 5\r\n\r\n{\"title\":\"a\"}", status: 400, shape: protocolShape},
		{name: "negative Content-Length", raw: "POST /api/tickets HTTP/1.1\r\nHost: {host}\r\nContent-Length: -1\r\n\r\n", status: 400, shape: protocolShape},
		{name: "Content-Length not a number", raw: "POST /api/tickets HTTP/1.1\r\nHost: {host}\r\nContent-Length: abc\r\n\r\n", status: 400, shape: protocolShape},
		{name: "two Host headers", raw: "GET /healthz HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\n\r\n", status: 400, shape: protocolShape},
		{name: "NUL in a header value", raw: "GET /api/tickets HTTP/1.1\r\nHost: {host}\r\nX-Evil: a\x00b\r\n\r\n", status: 400, shape: protocolShape},
		{name: "invalid method token", raw: "G@T /api/tickets HTTP/1.1\r\nHost: {host}\r\n\r\n", status: 400, shape: protocolShape},
		{name: "header of 2 MiB", raw: "GET /api/tickets HTTP/1.1\r\nHost: {host}\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", status: 431, shape: protocolShape},
		{name: "NUL in the request line", raw: "GET /api/tickets\x00 HTTP/1.1\r\nHost: {host}\r\n\r\n", status: 400, shape: protocolShape},
		// Bodies that are cut short or badly chunked reach the handler as a
		// read error: the documented invalid_json.
		{name: "body shorter than Content-Length", raw: "POST /api/tickets HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"title\":\"a\"}", halfClose: true, status: 400, errCode: "invalid_json"},
		{name: "broken chunked body", raw: "POST /api/tickets HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{\"title\":\"a\"}\r\n0\r\n\r\n", status: 400, errCode: "invalid_json"},
	}
}

func randomNonce() string { return fmt.Sprintf("n%d", time.Now().UnixNano()) }

// TestHostileRequests sends every hostile request of the table and checks
// each gets its 4xx in the documented shape: never a 5xx, a panic, or a
// dropped connection; the process serves normally afterwards.
func TestHostileRequests(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		// A ticket for the PATCH cases to aim at.
		send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/api/tickets", `{"title":"target"}`, "Content-Type", "application/json"))
		cases := hostileCases(t, f)
		if len(cases) < 50 {
			t.Fatalf("only %d hostile cases", len(cases))
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				base := f.PublicURL
				if tc.admin {
					base = f.AdminURL
				}
				var r resp
				if tc.raw != "" {
					r = sendRaw(t, base, tc.raw, tc.halfClose)
				} else {
					req := newRequest(t, tc.method, base+tc.target, tc.body, tc.headers...)
					if tc.chunked {
						req.Body = io.NopCloser(strings.NewReader(tc.body))
						req.ContentLength = -1
					}
					r = send(t, f.Client, req)
				}
				checkHostile(t, tc, r)
			})
		}
		if r := send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/readyz", "")); r.status != 200 {
			t.Fatalf("not ready after the hostile requests: %d %s", r.status, r.body)
		}
		if os.Getenv("E2E_DUMP_LOGS") != "" {
			t.Log(f.Logs.String())
		}
		if logs := f.Logs.String(); strings.Contains(logs, "panic") {
			t.Fatalf("a handler panicked:\n%s", logs)
		}
	})
}

func checkHostile(t *testing.T, tc hostileCase, r resp) {
	t.Helper()
	if r.status >= 500 {
		t.Fatalf("HTTP %d (server error) for a hostile request: %.300s", r.status, r.body)
	}
	if r.status != tc.status {
		t.Fatalf("HTTP %d, want %d: %.300s", r.status, tc.status, r.body)
	}
	if tc.shape == protocolShape {
		return
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want JSON: %.300s", ct, r.body)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %.300s", err, r.body)
	}
	str := func(k string) string {
		var s string
		if err := json.Unmarshal(m[k], &s); err != nil {
			t.Fatalf("%q is not a string in %.300s", k, r.body)
		}
		return s
	}
	allowed := func(keys ...string) {
		for k := range m {
			ok := false
			for _, a := range keys {
				ok = ok || k == a
			}
			if !ok {
				t.Fatalf("unexpected key %q in %.300s", k, r.body)
			}
		}
	}
	switch tc.shape {
	case ticketShape:
		allowed("error", "message")
		if str("error") != tc.errCode || str("message") == "" {
			t.Fatalf("want error %q with a message: %.300s", tc.errCode, r.body)
		}
	case authShape:
		allowed("error", "error_description")
		if str("error") != tc.errCode {
			t.Fatalf("want error %q: %.300s", tc.errCode, r.body)
		}
	case envelopeShape:
		allowed("code", "message", "timestamp", "request_id")
		var code int
		if err := json.Unmarshal(m["code"], &code); err != nil || code != tc.code {
			t.Fatalf("want code %d: %.300s", tc.code, r.body)
		}
		if msg := str("message"); !strings.HasPrefix(msg, envelopeMeanings[tc.code]) {
			t.Fatalf("message %q does not start with %q", msg, envelopeMeanings[tc.code])
		}
		if str("request_id") == "" || r.header.Get("API-Version") == "" && tc.code != 5002 {
			t.Fatalf("no request id or API-Version: %v %.300s", r.header, r.body)
		}
	}
}

// sendRaw writes raw (with {host} replaced) to the listener of base and
// reads one response.
func sendRaw(t *testing.T, base, raw string, halfClose bool) resp {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// A write error is not fatal: the server may answer (431) and close
	// before reading all of an oversized request.
	_, _ = io.WriteString(conn, strings.ReplaceAll(raw, "{host}", u.Host))
	if tc, ok := conn.(*net.TCPConn); ok && halfClose {
		_ = tc.CloseWrite() // a body cut short ends here
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no HTTP response: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}
