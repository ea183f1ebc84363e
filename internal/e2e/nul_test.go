package e2e_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/apikey"
	"gatehouse/internal/testenv"
)

// TestNULIsNotText sends a NUL character through every front door, in
// bodies, query strings, forms, GraphQL literals (arguments and filters)
// and variables: each answers its own validation error (400
// validation_failed / invalid_request, 400/5002, VALIDATION_FAILED), on
// both backends alike — never a database error.
func TestNULIsNotText(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := setup(t, b)
		_, adminKey, err := f.App.APIKeys.Create(context.Background(), "nul-test", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		jsonCT := []string{"Content-Type", "application/json"}
		form := []string{"Content-Type", "application/x-www-form-urlencoded"}
		for _, c := range []struct {
			name, method, target, body string
			headers                    []string
			status                     int
			errCode                    string
		}{
			{"ticket title", "POST", "/api/tickets", `{"title":"Printer\u0000 jams"}`, jsonCT, 400, "validation_failed"},
			{"ticket status", "PATCH", "/api/tickets/1/status", `{"status":"OPEN\u0000"}`, jsonCT, 400, "validation_failed"},
			{"ticket list cursor", "GET", "/api/tickets?cursor=%00abc", "", nil, 400, "validation_failed"},
			{"login username", "POST", "/api/auth/login", `{"username":"alice\u0000","password":"x"}`, jsonCT, 400, "invalid_request"},
			{"authorize client_id", "GET", "/oauth/authorize?client_id=%00&redirect_uri=x", "", nil, 400, "invalid_request"},
			{"login form", "POST", "/login", "username=ali%00ce&password=x", form, 400, "invalid_request"},
			{"token form", "POST", "/oauth/token", "grant_type=authorization_code&code=%00&client_id=" + f.app.AppKey + "&client_secret=" + f.secret, form, 400, "invalid_request"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := send(t, f.Client, newRequest(t, c.method, f.PublicURL+c.target, c.body, c.headers...))
				if m := r.object(t); r.status != c.status || m["error"] != c.errCode {
					t.Fatalf("HTTP %d %s, want %d %s", r.status, r.body, c.status, c.errCode)
				}
			})
		}

		for name, params := range map[string]url.Values{
			"order_no":  {"order_no": {"SO1001\x00"}},
			"other key": {"order_no": {"SO1001"}, "x\x00": {"1"}},
		} {
			t.Run("partner "+name, func(t *testing.T) {
				r := send(t, f.Client, newRequest(t, "GET", f.signed(t, f.app.AppKey, f.secret, "/api/v1/orders/query", params), ""))
				if m := r.object(t); r.status != 400 || m["code"] != float64(5002) || !strings.Contains(m["message"].(string), "NUL") {
					t.Fatalf("HTTP %d %s", r.status, r.body)
				}
			})
		}
		t.Run("partner deduction biz_no", func(t *testing.T) {
			r := send(t, f.Client, newRequest(t, "POST", f.signed(t, f.app.AppKey, f.secret, "/api/v1/inventory/deduct",
				url.Values{"biz_no": {"B\x001"}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}}), ""))
			if m := r.object(t); r.status != 400 || m["code"] != float64(5002) {
				t.Fatalf("HTTP %d %s", r.status, r.body)
			}
		})
		t.Run("partner app_key", func(t *testing.T) {
			r := send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/api/v1/orders/query?app_key=%00&order_no=SO1001", ""))
			if m := r.object(t); r.status != 400 || m["code"] != float64(5002) {
				t.Fatalf("HTTP %d %s", r.status, r.body)
			}
		})

		for name, body := range map[string]any{
			"payOrder literal":  map[string]any{"query": `mutation { payOrder(orderNo: "SO1002\u0000") { id } }`},
			"filter literal":    map[string]any{"query": `{ orders(where: {orderNo: "SO\u0000"}) { totalCount } }`},
			"nested filter":     map[string]any{"query": `{ orders(where: {or: [{orderNo: "a"}, {orderNoContains: "\u0000"}]}) { totalCount } }`},
			"variable":          map[string]any{"query": `mutation($n: String!) { payOrder(orderNo: $n) { id } }`, "variables": map[string]any{"n": "SO1002\x00"}},
			"input variable":    map[string]any{"query": `mutation($in: CreateSkuInput!) { createSku(input: $in) { id } }`, "variables": map[string]any{"in": map[string]any{"name": "w\x00", "stock": 1}}},
			"default value":     map[string]any{"query": `query($n: String = "x\u0000") { orders(where: {orderNo: $n}) { totalCount } }`},
			"fragment argument": map[string]any{"query": `{ ...F } fragment F on Query { orders(where: {orderNo: "\u0000"}) { totalCount } }`},
		} {
			t.Run("graphql "+name, func(t *testing.T) {
				raw, _ := jsonMarshal(body)
				r := send(t, f.Client, newRequest(t, "POST", f.AdminURL+"/graphql", raw, "Content-Type", "application/json", "X-API-Key", adminKey))
				var out struct {
					Errors []struct {
						Extensions map[string]any `json:"extensions"`
					} `json:"errors"`
				}
				_ = json.Unmarshal(r.body, &out)
				if len(out.Errors) == 0 || out.Errors[0].Extensions["code"] != "VALIDATION_FAILED" {
					t.Fatalf("HTTP %d %s", r.status, r.body)
				}
			})
		}
		// Nothing was paid or created.
		if o, err := f.App.Orders.Get(context.Background(), "SO1002"); err == nil && o.Status != "CREATED" {
			t.Fatalf("SO1002 is %s", o.Status)
		}
	})
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
