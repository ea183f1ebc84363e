package graph_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

const appFields = `id appName appKey status rateLimit expireDate callbackURL redirectURIs scopes previousSecretExpiresAt previousWebhookSecretExpiresAt createTime updateTime`

const createAppMutation = `mutation($in: CreatePartnerAppInput!) {
  createPartnerApp(input: $in) { appSecret webhookSecret app { ` + appFields + ` } }
}`

const updateAppMutation = `mutation($id: ID!, $in: UpdatePartnerAppInput!) {
  updatePartnerApp(id: $id, input: $in) { ` + appFields + ` }
}`

// TestCreatePartnerApp: defaults, every field, validation, uniqueness, and
// that the returned secret really signs partner calls.
func TestCreatePartnerApp(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)

		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "  Minimal  "}}).ok(t, "createPartnerApp")
		app := dig(p, "app")
		if str(app, "appName") != "Minimal" || !strings.HasPrefix(str(app, "appKey"), "ak_") ||
			num(app, "status") != 1 || num(app, "rateLimit") != 1000 || dig(app, "expireDate") != nil {
			t.Fatalf("defaults: %v", app)
		}
		if len(str(p, "appSecret")) < 32 || !strings.HasPrefix(str(p, "webhookSecret"), "whsec_") {
			t.Fatalf("secrets: %v", p)
		}

		full := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{
			"appName":      "Full app",
			"appKey":       "full_app-1",
			"rateLimit":    25,
			"expireDate":   "2031-05-17",
			"callbackURL":  "https://partner.example.com/hooks",
			"redirectURIs": []string{"https://partner.example.com/cb"},
			"scopes":       []string{"orders:read", "orders:read", "profile"},
		}}).ok(t, "createPartnerApp")
		app = dig(full, "app")
		if str(app, "appKey") != "full_app-1" || num(app, "rateLimit") != 25 ||
			str(app, "expireDate") != "2031-05-17T00:00:00.000Z" || str(app, "callbackURL") != "https://partner.example.com/hooks" ||
			str(app, "redirectURIs", 0) != "https://partner.example.com/cb" ||
			len(dig(app, "scopes").([]any)) != 2 {
			t.Fatalf("all fields: %v", app)
		}

		// The secret shown once is the one partner calls are signed with.
		o := a.gql(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "GQ-1", amount: "12.50"}) { orderNo } }`,
			map[string]any{"app": str(app, "id")}).ok(t, "createOrder")
		pc := partnerclient.New(a.PublicURL, "full_app-1", str(full, "appSecret"))
		got, err := pc.OrderV1(context.Background(), str(o, "orderNo"))
		if err != nil || got.OrderNo != "GQ-1" {
			t.Fatalf("signed call with the returned secret: %+v, %v", got, err)
		}

		long := strings.Repeat("n", 129)
		bad := []struct {
			name  string
			in    map[string]any
			field string
		}{
			{"no name", map[string]any{"appName": "   "}, "appName"},
			{"long name", map[string]any{"appName": long}, "appName"},
			{"control character", map[string]any{"appName": "a\u0007b"}, "appName"},
			{"empty app key", map[string]any{"appName": "x", "appKey": ""}, "appKey"},
			{"long app key", map[string]any{"appName": "x", "appKey": strings.Repeat("k", 65)}, "appKey"},
			{"app key character", map[string]any{"appName": "x", "appKey": "has space"}, "appKey"},
			{"rate limit 0", map[string]any{"appName": "x", "rateLimit": 0}, "rateLimit"},
			{"rate limit too high", map[string]any{"appName": "x", "rateLimit": 1_000_001}, "rateLimit"},
			{"callback not http", map[string]any{"appName": "x", "callbackURL": "ftp://partner.example.com/h"}, "callbackURL"},
			{"private callback", map[string]any{"appName": "x", "callbackURL": "http://127.0.0.1:9/h"}, "callbackURL"},
			{"relative redirect", map[string]any{"appName": "x", "redirectURIs": []string{"/cb"}}, "redirectURIs"},
			{"bad scope", map[string]any{"appName": "x", "scopes": []string{"a b"}}, "scopes"},
		}
		for _, c := range bad {
			t.Run(c.name, func(t *testing.T) {
				e := a.gql(t, createAppMutation, map[string]any{"in": c.in}).fails(t, "VALIDATION_FAILED")
				if e.Extensions["field"] != c.field {
					t.Fatalf("field %v, want %s: %s", e.Extensions["field"], c.field, e.Message)
				}
			})
		}
		t.Run("bad date", func(t *testing.T) {
			a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "x", "expireDate": "31/12/2030"}}).fails(t, "VALIDATION_FAILED")
		})
		t.Run("missing name", func(t *testing.T) {
			r := a.gql(t, `mutation { createPartnerApp(input: {appKey: "k"}) { appSecret } }`, nil)
			if len(r.Errors) == 0 || r.Data["createPartnerApp"] != nil {
				t.Fatalf("%s", r.Body)
			}
		})
		t.Run("duplicate key", func(t *testing.T) {
			a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "again", "appKey": "full_app-1"}}).fails(t, "CONFLICT")
		})
		// Nothing was created by the refused calls.
		r := a.gql(t, `{ partnerApps { totalCount } }`, nil).ok(t, "partnerApps")
		if num(r, "totalCount") != 2 {
			t.Fatalf("apps: %v", r)
		}
	})
}

// TestUpdatePartnerApp: each field, clearing with null, validation, and
// effect on partner calls served by another replica (disable, rate limit)
// within 1 s.
func TestUpdatePartnerApp(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{
			"appName": "Upd", "appKey": "upd", "expireDate": "2030-01-01",
			"callbackURL": "https://partner.example.com/h", "scopes": []string{"a"}, "redirectURIs": []string{"https://p.example.com/cb"},
		}}).ok(t, "createPartnerApp")
		id := str(p, "app", "id")
		upd := func(in map[string]any) gqlResult {
			return a.gql(t, updateAppMutation, map[string]any{"id": id, "in": in})
		}

		app := upd(map[string]any{"appName": "Renamed", "rateLimit": 7, "expireDate": "2032-02-29T23:30:00-05:00", "scopes": []string{"b", "c"}}).ok(t, "updatePartnerApp")
		if str(app, "appName") != "Renamed" || num(app, "rateLimit") != 7 || str(app, "expireDate") != "2032-02-29T00:00:00.000Z" ||
			len(dig(app, "scopes").([]any)) != 2 || str(app, "callbackURL") != "https://partner.example.com/h" {
			t.Fatalf("after update: %v", app)
		}
		// Absent fields are kept; null clears the clearable ones.
		app = upd(map[string]any{"expireDate": nil, "callbackURL": nil, "redirectURIs": nil, "scopes": nil}).ok(t, "updatePartnerApp")
		if dig(app, "expireDate") != nil || str(app, "callbackURL") != "" || len(dig(app, "scopes").([]any)) != 0 ||
			len(dig(app, "redirectURIs").([]any)) != 0 || str(app, "appName") != "Renamed" || num(app, "rateLimit") != 7 {
			t.Fatalf("after clearing: %v", app)
		}
		// The app key may be repeated, not changed.
		upd(map[string]any{"appKey": "upd"}).ok(t, "updatePartnerApp")
		if e := upd(map[string]any{"appKey": "other"}).fails(t, "VALIDATION_FAILED"); e.Extensions["field"] != "appKey" {
			t.Fatalf("%v", e)
		}
		for name, in := range map[string]map[string]any{
			"status 2":   {"status": 2},
			"rate 0":     {"rateLimit": 0},
			"empty name": {"appName": ""},
			"bad url":    {"callbackURL": "not a url"},
		} {
			t.Run(name, func(t *testing.T) { upd(in).fails(t, "VALIDATION_FAILED") })
		}
		a.gql(t, updateAppMutation, map[string]any{"id": "99999", "in": map[string]any{"appName": "x"}}).fails(t, "NOT_FOUND")

		// Effects on the partner API, seen by another replica (same database
		// and Redis): secret from creation, order of this app.
		replica := apptest.Start(t, b, func(c *config.Config) {
			c.Database.URL = a.App.Cfg.Database.URL
			c.Auth.MasterKeyB64 = a.App.Cfg.Auth.MasterKeyB64
		})
		a.gql(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "UPD-1", amount: "1"}) { id } }`, map[string]any{"app": id}).ok(t, "createOrder")
		pc := partnerclient.New(replica.PublicURL, "upd", str(p, "appSecret"))
		ctx := context.Background()
		if _, err := pc.OrderV1(ctx, "UPD-1"); err != nil {
			t.Fatal(err)
		}
		upd(map[string]any{"status": 0}).ok(t, "updatePartnerApp")
		eventually(t, time.Second+500*time.Millisecond, "a disabled app is refused (4001) within 1 s", func() bool {
			_, err := pc.OrderV1(ctx, "UPD-1")
			var ae *partnerclient.APIError
			return errors.As(err, &ae) && ae.HTTPStatus == 401 && ae.Code == 4001
		})
		upd(map[string]any{"status": 1, "rateLimit": 1}).ok(t, "updatePartnerApp")
		eventually(t, 2*time.Second, "rate limit 1 applies", func() bool {
			_, err1 := pc.OrderV1(ctx, "UPD-1")
			_, err2 := pc.OrderV1(ctx, "UPD-1")
			var ae *partnerclient.APIError
			return err1 == nil && errors.As(err2, &ae) && ae.HTTPStatus == 429
		})
	})
}

// TestRotateSecrets: new secrets are returned once, the other is null,
// and during the overlap both app secrets sign.
func TestRotateSecrets(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Rot", "appKey": "rot"}}).ok(t, "createPartnerApp")
		id, oldSecret, oldHook := str(p, "app", "id"), str(p, "appSecret"), str(p, "webhookSecret")
		a.gql(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "ROT-1", amount: "1"}) { id } }`, map[string]any{"app": id}).ok(t, "createOrder")

		r := a.gql(t, `mutation($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret webhookSecret app { id previousSecretExpiresAt } } }`, map[string]any{"id": id}).ok(t, "rotatePartnerAppSecret")
		newSecret := str(r, "appSecret")
		if newSecret == "" || newSecret == oldSecret || dig(r, "webhookSecret") != nil || str(r, "app", "previousSecretExpiresAt") == "" {
			t.Fatalf("rotate app secret: %v", r)
		}
		exp, _ := time.Parse(time.RFC3339Nano, str(r, "app", "previousSecretExpiresAt"))
		if d := time.Until(exp); d < 23*time.Hour || d > 25*time.Hour {
			t.Fatalf("overlap ends in %v, want 24 h", d)
		}
		ctx := context.Background()
		for _, sec := range []string{oldSecret, newSecret} {
			if _, err := partnerclient.New(a.PublicURL, "rot", sec).OrderV1(ctx, "ROT-1"); err != nil {
				t.Fatalf("secret during the overlap: %v", err)
			}
		}

		w := a.gql(t, `mutation($id: ID!) { rotateWebhookSecret(id: $id) { appSecret webhookSecret app { previousWebhookSecretExpiresAt } } }`, map[string]any{"id": id}).ok(t, "rotateWebhookSecret")
		if !strings.HasPrefix(str(w, "webhookSecret"), "whsec_") || str(w, "webhookSecret") == oldHook || dig(w, "appSecret") != nil ||
			str(w, "app", "previousWebhookSecretExpiresAt") == "" {
			t.Fatalf("rotate webhook secret: %v", w)
		}
		secrets := apptest.WebhookSecrets(t, a.Env, intID(t, r, "app", "id"))
		if len(secrets) != 2 || secrets[0] != str(w, "webhookSecret") || secrets[1] != oldHook {
			t.Fatalf("webhook secrets after rotation: %d", len(secrets))
		}
		for _, m := range []string{"rotatePartnerAppSecret", "rotateWebhookSecret"} {
			a.gql(t, `mutation { `+m+`(id: 424242) { appSecret } }`, nil).fails(t, "NOT_FOUND")
		}
	})
}

// TestSkuMutations: createSku and setSkuStock.
func TestSkuMutations(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		s := a.gql(t, `mutation { createSku(input: {name: " Blue mug ", stock: 30}) { id name stock updateTime } }`, nil).ok(t, "createSku")
		if str(s, "name") != "Blue mug" || num(s, "stock") != 30 || str(s, "updateTime") == "" {
			t.Fatalf("createSku: %v", s)
		}
		s2 := a.gql(t, `mutation($id: ID!) { setSkuStock(id: $id, stock: 0) { id stock } }`, map[string]any{"id": str(s, "id")}).ok(t, "setSkuStock")
		if num(s2, "stock") != 0 || str(s2, "id") != str(s, "id") {
			t.Fatalf("setSkuStock: %v", s2)
		}
		a.gql(t, `mutation($id: ID!) { setSkuStock(id: $id, stock: 12) { id } }`, map[string]any{"id": str(s, "id")}).ok(t, "setSkuStock")
		if got := num(a.gql(t, `query($id: ID!) { skus(where: {id: $id}) { edges { node { stock } } } }`, map[string]any{"id": str(s, "id")}).ok(t, "skus"), "edges", 0, "node", "stock"); got != 12 {
			t.Fatalf("stock read back: %d", got)
		}
		for name, q := range map[string]string{
			"empty name":     `mutation { createSku(input: {name: "  ", stock: 1}) { id } }`,
			"long name":      `mutation { createSku(input: {name: "` + strings.Repeat("x", 201) + `", stock: 1}) { id } }`,
			"negative stock": `mutation { createSku(input: {name: "n", stock: -1}) { id } }`,
			"set negative":   `mutation { setSkuStock(id: 1, stock: -5) { id } }`,
		} {
			t.Run(name, func(t *testing.T) { a.gql(t, q, nil).fails(t, "VALIDATION_FAILED") })
		}
		a.gql(t, `mutation { setSkuStock(id: 777777, stock: 5) { id } }`, nil).fails(t, "NOT_FOUND")
	})
}

// TestOrderMutations: createOrder validation and uniqueness; payOrder's
// state rule and its order.paid delivery.
func TestOrderMutations(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		t.Cleanup(sink.Close)
		p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Shop", "callbackURL": sink.URL + "/hook"}}).ok(t, "createPartnerApp")
		appID := str(p, "app", "id")
		const create = `mutation($in: CreateOrderInput!) { createOrder(input: $in) { id orderNo appID amount amountDecimal status customerName customerPhone customerEmail createTime payTime } }`
		o := a.gql(t, create, map[string]any{"in": map[string]any{
			"appID": appID, "orderNo": "SO-9", "amount": "99.90",
			"customerName": "Dana", "customerPhone": "13800000000", "customerEmail": "dana@example.com",
		}}).ok(t, "createOrder")
		if str(o, "orderNo") != "SO-9" || str(o, "appID") != appID || num(o, "amount") != 9990 || str(o, "amountDecimal") != "99.90" || str(o, "status") != "CREATED" ||
			str(o, "customerEmail") != "dana@example.com" || dig(o, "payTime") != nil {
			t.Fatalf("createOrder: %v", o)
		}
		bad := map[string]map[string]any{
			"amount three decimals": {"appID": appID, "orderNo": "B1", "amount": "1.999"},
			"amount negative":       {"appID": appID, "orderNo": "B2", "amount": "-1"},
			"amount not a number":   {"appID": appID, "orderNo": "B3", "amount": "ten"},
			"empty order no":        {"appID": appID, "orderNo": "", "amount": "1"},
			"order no with space":   {"appID": appID, "orderNo": "a b", "amount": "1"},
			"unknown app":           {"appID": "98765", "orderNo": "B4", "amount": "1"},
			"bad email":             {"appID": appID, "orderNo": "B5", "amount": "1", "customerEmail": "nope"},
		}
		for name, in := range bad {
			t.Run(name, func(t *testing.T) { a.gql(t, create, map[string]any{"in": in}).fails(t, "VALIDATION_FAILED") })
		}
		a.gql(t, create, map[string]any{"in": map[string]any{"appID": appID, "orderNo": "SO-9", "amount": "1"}}).fails(t, "CONFLICT")

		const pay = `mutation($no: String!) { payOrder(orderNo: $no) { orderNo status payTime } }`
		paid := a.gql(t, pay, map[string]any{"no": "SO-9"}).ok(t, "payOrder")
		if str(paid, "status") != "PAID" || str(paid, "payTime") == "" {
			t.Fatalf("payOrder: %v", paid)
		}
		a.gql(t, pay, map[string]any{"no": "SO-9"}).fails(t, "INVALID_STATE")
		a.gql(t, pay, map[string]any{"no": "NO-SUCH"}).fails(t, "NOT_FOUND")
		d := a.gql(t, `query($app: ID!) { webhookDeliveries(where: {appID: $app}) { totalCount edges { node { eventType bizData } } } }`, map[string]any{"app": appID}).ok(t, "webhookDeliveries")
		if num(d, "totalCount") != 1 || str(d, "edges", 0, "node", "eventType") != "order.paid" || !strings.Contains(str(d, "edges", 0, "node", "bizData"), "SO-9") {
			t.Fatalf("order.paid delivery: %v", d)
		}
	})
}

// TestResendWebhookDeliveries: a delivery that failed every attempt is put
// back to PENDING with retryCount 0 and its attempts kept (new ones
// continue the numbering); resending all failed ones counts them. Each
// app's endpoint fails six times only (one delivery), which never opens
// its circuit breaker (judged over 10 attempts).
func TestResendWebhookDeliveries(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b, func(c *config.Config) {
			c.Webhooks.AllowPrivate = true
			c.Webhooks.RetryBase = time.Millisecond
		})
		var fixed atomic.Bool
		failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !fixed.Load() {
				w.WriteHeader(500)
			}
		}))
		t.Cleanup(failing.Close)
		const failed = `query($app: ID!) { webhookDeliveries(where: {appID: $app, status: FAILED}) { edges { node { id status retryCount attempts(first: 20) { totalCount } } } } }`
		// failedDelivery creates an app calling failing back, pays an order
		// of it, and waits for the order.paid delivery to be FAILED.
		failedDelivery := func(no string) (appID string, node map[string]any) {
			p := a.gql(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Down " + no, "callbackURL": failing.URL + "/hook/" + no}}).ok(t, "createPartnerApp")
			appID = str(p, "app", "id")
			a.gql(t, `mutation($app: ID!, $no: String!) { createOrder(input: {appID: $app, orderNo: $no, amount: "5"}) { id } }`, map[string]any{"app": appID, "no": no}).ok(t, "createOrder")
			a.gql(t, `mutation($no: String!) { payOrder(orderNo: $no) { status } }`, map[string]any{"no": no}).ok(t, "payOrder")
			eventually(t, 20*time.Second, "the delivery is FAILED", func() bool {
				r := a.gql(t, failed, map[string]any{"app": appID}).ok(t, "webhookDeliveries")
				node, _ = dig(r, "edges", 0, "node").(map[string]any)
				return node != nil
			})
			return appID, node
		}
		_, node := failedDelivery("RS-1")
		if n := num(node, "attempts", "totalCount"); n != 6 {
			t.Fatalf("attempts before resend: %d", n)
		}
		fixed.Store(true)
		r := a.gql(t, `mutation($id: ID!) { resendWebhookDelivery(id: $id) { id status retryCount attempts(first: 20) { totalCount } } }`, map[string]any{"id": str(node, "id")}).ok(t, "resendWebhookDelivery")
		if str(r, "status") != "PENDING" || num(r, "retryCount") != 0 || num(r, "attempts", "totalCount") < 6 {
			t.Fatalf("after resend: %v", r)
		}
		const one = `query($id: ID!) { webhookDeliveries(where: {id: $id}) { edges { node { status attempts(first: 20, orderBy: {field: ATTEMPT_NO, direction: DESC}) { edges { node { attemptNo responseStatus } } } } } } }`
		eventually(t, 20*time.Second, "the resent delivery succeeds with attempt 7", func() bool {
			r := a.gql(t, one, map[string]any{"id": str(node, "id")}).ok(t, "webhookDeliveries")
			return str(r, "edges", 0, "node", "status") == "SUCCESS" && num(r, "edges", 0, "node", "attempts", "edges", 0, "node", "attemptNo") == 7
		})
		a.gql(t, `mutation { resendWebhookDelivery(id: 555555) { id } }`, nil).fails(t, "NOT_FOUND")

		// Another app's delivery fails; the bulk resend re-queues it (and only it).
		fixed.Store(false)
		appID, _ := failedDelivery("RS-2")
		n := a.gql(t, `mutation($app: ID) { resendFailedWebhookDeliveries(appID: $app) }`, map[string]any{"app": appID})
		if n.Status != 200 || len(n.Errors) > 0 || n.Data["resendFailedWebhookDeliveries"] != float64(1) {
			t.Fatalf("resendFailedWebhookDeliveries: %s", n.Body)
		}
		a.gql(t, `mutation { resendFailedWebhookDeliveries(appID: 31337) }`, nil).fails(t, "NOT_FOUND")
		all := a.gql(t, `mutation { resendFailedWebhookDeliveries }`, nil)
		if all.Status != 200 || len(all.Errors) > 0 {
			t.Fatalf("resend all: %s", all.Body)
		}
	})
}

// TestAPIKeyMutations: createAPIKey shows the key once and it works;
// validation of the name.
func TestAPIKeyMutations(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		r := a.gql(t, `mutation { createAPIKey(name: " ops ") { key apiKey { id name prefix status requestCount createTime } } }`, nil).ok(t, "createAPIKey")
		key := str(r, "key")
		if !strings.HasPrefix(key, "ghk_") || len(key) < 40 || str(r, "apiKey", "name") != "ops" ||
			str(r, "apiKey", "prefix") != key[:8] || num(r, "apiKey", "status") != 1 {
			t.Fatalf("createAPIKey: %v", r)
		}
		gqlAs(t, a.Env, key, `{ apiKeys { totalCount } }`, nil).ok(t, "apiKeys")
		// Stored hashed: the database holds the SHA-256, never the key.
		row, err := a.App.DB.APIKey.Get(context.Background(), intID(t, r, "apiKey", "id"))
		if err != nil || row.KeyHash != secret.HashToken(key) || strings.Contains(row.KeyHash, key) {
			t.Fatalf("stored key: %v", err)
		}
		for name, n := range map[string]string{"empty": "", "blank": "   ", "long": strings.Repeat("k", 129), "control": "a\\nb"} {
			t.Run(name, func(t *testing.T) {
				e := a.gql(t, `mutation { createAPIKey(name: "`+n+`") { key } }`, nil).fails(t, "VALIDATION_FAILED")
				if e.Extensions["field"] != "name" {
					t.Fatalf("%v", e)
				}
			})
		}
	})
}

// TestCreateUser: roles, hashing, validation and uniqueness.
func TestCreateUser(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		const create = `mutation($in: CreateUserInput!) { createUser(input: $in) { id username roles status createTime } }`
		u := a.gql(t, create, map[string]any{"in": map[string]any{"username": "alice.w", "password": "correct horse", "roles": []string{"admin", "ops", "admin"}}}).ok(t, "createUser")
		if str(u, "username") != "alice.w" || num(u, "status") != 1 || len(dig(u, "roles").([]any)) != 2 {
			t.Fatalf("createUser: %v", u)
		}
		row, err := a.App.DB.User.Get(context.Background(), intID(t, u, "id"))
		if err != nil || !secret.CheckPassword(row.PasswordHash, "correct horse") || strings.Contains(row.PasswordHash, "correct horse") {
			t.Fatalf("stored password: %v", err)
		}
		a.gql(t, create, map[string]any{"in": map[string]any{"username": "bob", "password": "12345678"}}).ok(t, "createUser")
		bad := []struct {
			name, username, password string
			roles                    []string
			field                    string
		}{
			{"empty username", "", "password1", nil, "username"},
			{"long username", strings.Repeat("u", 65), "password1", nil, "username"},
			{"username with space", "a b", "password1", nil, "username"},
			{"username unicode", "émile", "password1", nil, "username"},
			{"short password", "carol", "1234567", nil, "password"},
			{"password over 72 bytes", "carol", strings.Repeat("p", 73), nil, "password"},
			{"empty role", "carol", "password1", []string{""}, "roles"},
			{"role with space", "carol", "password1", []string{"a b"}, "roles"},
		}
		for _, c := range bad {
			t.Run(c.name, func(t *testing.T) {
				e := a.gql(t, create, map[string]any{"in": map[string]any{"username": c.username, "password": c.password, "roles": c.roles}}).fails(t, "VALIDATION_FAILED")
				if e.Extensions["field"] != c.field || strings.Contains(e.Message, c.password) && c.password != "" {
					t.Fatalf("%v", e)
				}
			})
		}
		a.gql(t, create, map[string]any{"in": map[string]any{"username": "alice.w", "password": "another one"}}).fails(t, "CONFLICT")
		if n := num(a.gql(t, `{ users { totalCount } }`, nil).ok(t, "users"), "totalCount"); n != 2 {
			t.Fatalf("users: %d", n)
		}
	})
}
