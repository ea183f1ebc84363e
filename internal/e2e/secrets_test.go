package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/apikey"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// TestSecretsNeverStoredOrLoggedInPlainText runs every capability end to
// end — partner apps created (service and GraphQL), signed calls (MD5,
// HMAC, wrong signatures), secret and webhook-secret rotations, a paid
// order's webhook delivered, users logging in (API, form, OAuth code flow,
// refresh, logout), API keys created and used, admin mutations that carry
// passwords or hand out keys (accepted and refused, all in the audit log) —
// and then reads the whole
// database (the SQLite files byte by byte; on Postgres every text, json and
// bytea column) and the captured logs: none may hold any of the secrets,
// keys, passwords or tokens handed out or sent.
func TestSecretsNeverStoredOrLoggedInPlainText(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		bootstrap := "bootstrap-" + secret.RandomToken("", 24)
		provider := paymenttest.New(t)
		f := setup(t, b, func(c *config.Config) {
			c.Auth.BootstrapAPIKey = bootstrap
			c.Webhooks.AllowPrivate = true
			c.Payments.URL, c.Payments.APIKey, c.Payments.Secret = provider.URL, provider.APIKey, provider.Secret
		})
		ctx := context.Background()
		secrets := map[string]string{ // what → value
			"bootstrap API key":     bootstrap,
			"fixture user password": userPassword,
			"app secret":            f.secret, "other app secret": f.otherSec, "slow app secret": f.slowSec,
			"fixture webhook secret": f.webhookSecret,
			"payment API key":        provider.APIKey, "payment secret": provider.Secret,
		}
		add := func(what, v string) {
			t.Helper()
			if v == "" {
				t.Fatalf("%s is empty", what)
			}
			secrets[what] = v
		}

		// A partner app with a webhook sink, created by the service.
		var delivered atomic.Int32
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			delivered.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		defer sink.Close()
		hook, sec, err := f.App.Partners.Create(ctx, partner.CreateInput{AppName: "hooked", CallbackURL: sink.URL + "/hook"})
		if err != nil {
			t.Fatal(err)
		}
		add("hooked app secret", sec.AppSecret)
		add("hooked webhook secret", sec.WebhookSecret)
		if _, err := f.App.Orders.Create(ctx, orderInput(hook.ID, "SO-HOOK-1")); err != nil {
			t.Fatal(err)
		}

		// API keys: created by the service and through GraphQL.
		_, key, err := f.App.APIKeys.Create(ctx, "audit key", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		add("API key", key)
		gql := func(apiKey, query string) map[string]any {
			t.Helper()
			body, _ := json.Marshal(map[string]string{"query": query})
			r := send(t, f.Client, newRequest(t, "POST", f.AdminURL+"/graphql", string(body), "Content-Type", "application/json", "X-API-Key", apiKey))
			m := r.object(t)
			if r.status != 200 || m["errors"] != nil {
				t.Fatalf("graphql: HTTP %d %s", r.status, r.body)
			}
			return m["data"].(map[string]any)
		}
		d := gql(key, `mutation { createAPIKey(name: "from graphql") { key } }`)
		add("GraphQL API key", d["createAPIKey"].(map[string]any)["key"].(string))
		d = gql(bootstrap, `mutation { createPartnerApp(input: {appName: "via graphql", redirectURIs: ["`+f.redirect+`"], scopes: ["profile"]}) { app { id appKey } appSecret webhookSecret } }`)
		p := d["createPartnerApp"].(map[string]any)
		add("GraphQL app secret", p["appSecret"].(string))
		add("GraphQL webhook secret", p["webhookSecret"].(string))
		gqlAppID := p["app"].(map[string]any)["id"].(string)
		gqlAppKey := p["app"].(map[string]any)["appKey"].(string)
		d = gql(key, `mutation { rotatePartnerAppSecret(id: "`+gqlAppID+`") { appSecret } }`)
		add("GraphQL rotated app secret", d["rotatePartnerAppSecret"].(map[string]any)["appSecret"].(string))
		d = gql(key, `mutation { rotateWebhookSecret(id: "`+gqlAppID+`") { webhookSecret } }`)
		add("GraphQL rotated webhook secret", d["rotateWebhookSecret"].(map[string]any)["webhookSecret"].(string))
		d = gql(key, `mutation { createUser(input: {username: "bob-audit", password: "bob's long password", roles: ["ops"]}) { id } }`)
		add("GraphQL user password", "bob's long password")
		bobID := d["createUser"].(map[string]any)["id"].(string)

		// The admin mutations that carry a password or hand out a key, as
		// an ADMIN key and refused (a READ_ONLY key, bad input): every one
		// is in the audit log, and no value of theirs may be.
		gqlCode := func(apiKey, query string) string {
			t.Helper()
			body, _ := json.Marshal(map[string]string{"query": query})
			m := send(t, f.Client, newRequest(t, "POST", f.AdminURL+"/graphql", string(body), "Content-Type", "application/json", "X-API-Key", apiKey)).object(t)
			errs, _ := m["errors"].([]any)
			if len(errs) == 0 {
				return ""
			}
			code, _ := errs[0].(map[string]any)["extensions"].(map[string]any)["code"].(string)
			return code
		}
		d = gql(key, `mutation { createAPIKey(name: "viewer", role: READ_ONLY) { key } }`)
		readOnly := d["createAPIKey"].(map[string]any)["key"].(string)
		add("READ_ONLY API key", readOnly)
		gql(key, `mutation { setUserPassword(id: "`+bobID+`", password: "bob's second long password") { id } }`)
		add("GraphQL reset password", "bob's second long password")
		if c := gqlCode(readOnly, `mutation { setUserPassword(id: "`+bobID+`", password: "refused password of a viewer") { id } }`); c != "FORBIDDEN" {
			t.Fatalf("READ_ONLY setUserPassword: %q", c)
		}
		add("refused reset password", "refused password of a viewer")
		if c := gqlCode(key, `mutation { createUser(input: {username: "bad name", password: "refused password of a bad name"}) { id } }`); c != "VALIDATION_FAILED" {
			t.Fatalf("invalid createUser: %q", c)
		}
		add("refused user password", "refused password of a bad name")
		if c := gqlCode(readOnly, `mutation { createAPIKey(name: "escalate") { key } }`); c != "FORBIDDEN" {
			t.Fatalf("READ_ONLY createAPIKey: %q", c)
		}
		gql(key, `mutation { disableUser(id: "`+bobID+`") { id } }`)
		var audited int
		if err := f.App.DB.SQL.QueryRowContext(ctx, `SELECT count(*) FROM audit_events WHERE outcome = 'REFUSED'`).Scan(&audited); err != nil || audited < 3 {
			t.Fatalf("refused mutations in the audit log: %d, %v", audited, err)
		}
		gql(key, `mutation { payOrder(orderNo: "SO-HOOK-1") { status } }`)
		// A refund through the payment provider (signed with the payment
		// secret), then one the provider refuses.
		gql(key, `mutation { refundOrder(orderNo: "SO-HOOK-1", reason: "audit") { status } }`)
		if _, err := f.App.Orders.Create(ctx, orderInput(hook.ID, "SO-HOOK-2")); err != nil {
			t.Fatal(err)
		}
		gql(key, `mutation { payOrder(orderNo: "SO-HOOK-2") { status } }`)
		provider.Script(401)
		refused := send(t, f.Client, newRequest(t, "POST", f.AdminURL+"/graphql", `{"query":"mutation { refundOrder(orderNo: \"SO-HOOK-2\") { status } }"}`,
			"Content-Type", "application/json", "X-API-Key", key))
		if !strings.Contains(string(refused.body), `"code":"PAYMENT_FAILED"`) {
			t.Fatalf("refused refund: %s", refused.body)
		}
		for i, c := range provider.Calls() {
			add("payment signature "+strconv.Itoa(i), c.Signature)
		}

		// Rotations through the service.
		_, rotated, err := f.App.Partners.RotateSecret(ctx, f.app.ID)
		if err != nil {
			t.Fatal(err)
		}
		add("rotated app secret", rotated)
		_, rotatedHook, err := f.App.Partners.RotateWebhookSecret(ctx, hook.ID)
		if err != nil {
			t.Fatal(err)
		}
		add("rotated webhook secret", rotatedHook)

		// Signed calls with old and new secrets, MD5 and HMAC, and wrong ones
		// (whose 4002 explains the signed string).
		for _, s := range []string{f.secret, rotated} {
			for _, path := range []string{"/api/v1/orders/query", "/api/v2/orders/query"} {
				if r := send(t, f.Client, newRequest(t, "GET", f.signed(t, f.app.AppKey, s, path, url.Values{"order_no": {"SO1001"}}), "")); r.status != 200 {
					t.Fatalf("signed call: %d %s", r.status, r.body)
				}
			}
		}
		hmacURL := f.signed(t, f.app.AppKey, rotated, "/api/v1/inventory/deduct", url.Values{"biz_no": {"AUDIT-1"}, "sku_id": {strconv.Itoa(f.skuID)}, "quantity": {"1"}, "sign_type": {"HMAC-SHA256"}})
		if r := send(t, f.Client, newRequest(t, "POST", hmacURL, "")); r.status != 200 {
			t.Fatalf("deduct: %d %s", r.status, r.body)
		}
		if r := send(t, f.Client, newRequest(t, "GET", f.signed(t, gqlAppKey, "wrong-secret-wrong-secret", "/api/v1/orders/query", url.Values{"order_no": {"SO1001"}}), "")); r.status != 401 {
			t.Fatalf("wrong signature: %d %s", r.status, r.body)
		}

		// Users: API login, me, logout; a failed login; the OAuth code flow.
		login := send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"`+userName+`","password":"`+userPassword+`"}`, "Content-Type", "application/json")).object(t)
		jwt := login["access_token"].(string)
		add("JWT", jwt)
		send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/api/auth/me", "", "Authorization", "Bearer "+jwt))
		send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/auth/logout", "", "Authorization", "Bearer "+jwt))
		wrongPassword := "not the password of alice at all"
		add("wrong password", wrongPassword)
		send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/api/auth/login", `{"username":"`+userName+`","password":"`+wrongPassword+`"}`, "Content-Type", "application/json"))

		br := browser(t)
		authorize := f.PublicURL + "/oauth/authorize?" + url.Values{"client_id": {f.app.AppKey}, "redirect_uri": {f.redirect}, "response_type": {"code"}, "scope": {"profile"}, "state": {"s"}}.Encode()
		id := pendingID(t, send(t, br, newRequest(t, "GET", authorize, "")).header.Get("Location"))
		send(t, br, newRequest(t, "POST", f.PublicURL+"/login", url.Values{"username": {userName}, "password": {userPassword}}.Encode(), form...))
		conf := send(t, br, newRequest(t, "POST", f.PublicURL+"/oauth/confirm", "approved=true&request_id="+id, form...))
		loc, err := url.Parse(conf.header.Get("Location"))
		if err != nil || loc.Query().Get("code") == "" {
			t.Fatalf("no code: %d %v", conf.status, conf.header)
		}
		code := loc.Query().Get("code")
		add("OAuth code", code)
		for _, c := range br.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(f.PublicURL, "http://")}) {
			add("session cookie "+c.Name, c.Value)
		}
		tok := send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"client_id": {f.app.AppKey}, "client_secret": {rotated}, "redirect_uri": {f.redirect}}.Encode(), form...)).object(t)
		add("OAuth access token", tok["access_token"].(string))
		add("OAuth refresh token", tok["refresh_token"].(string))
		send(t, f.Client, newRequest(t, "GET", f.PublicURL+"/oauth/userinfo", "", "Authorization", "Bearer "+tok["access_token"].(string)))
		tok2 := send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)},
			"client_id": {f.app.AppKey}, "client_secret": {rotated}}.Encode(), form...)).object(t)
		add("rotated OAuth access token", tok2["access_token"].(string))
		add("rotated OAuth refresh token", tok2["refresh_token"].(string))
		send(t, f.Client, newRequest(t, "POST", f.PublicURL+"/oauth/revoke", url.Values{"token": {tok2["refresh_token"].(string)},
			"client_id": {f.app.AppKey}, "client_secret": {rotated}}.Encode(), form...))

		// The webhook of the paid order reaches the sink.
		deadline := time.Now().Add(15 * time.Second)
		for delivered.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the order.paid webhook never arrived")
			}
			time.Sleep(20 * time.Millisecond) // polling the sink, not waiting for work to finish
		}
		// Stop background work and flush counters, so that everything that
		// will ever be written is in the database.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := f.App.Close(cctx); err != nil {
			t.Logf("close: %v", err)
		}

		var stored []dumped
		if b.Embedded() {
			stored = sqliteFiles(t, f.App.Cfg.Database.URL)
		} else {
			stored = postgresColumns(t, b.DatabaseURL)
		}
		if len(stored) == 0 {
			t.Fatal("nothing read from the database")
		}
		logs := f.Logs.String()
		if !strings.Contains(logs, "/oauth/token") || !strings.Contains(logs, "/api/v1/orders/query") {
			t.Fatal("the logs do not show the requests: is the capture working?")
		}
		for what, v := range secrets {
			needles := [][]byte{[]byte(v)}
			if rest, ok := strings.CutPrefix(v, "whsec_"); ok {
				needles = append(needles, []byte(rest)) // the key without its prefix
			}
			for _, n := range needles {
				for _, s := range stored {
					if bytes.Contains(s.data, n) || (s.hexBytea && bytes.Contains(s.data, []byte(hex.EncodeToString(n)))) {
						t.Errorf("%s is stored in plain text in %s", what, s.where)
					}
				}
				if strings.Contains(logs, string(n)) {
					t.Errorf("%s is in the logs", what)
				}
			}
		}
		t.Logf("%d secrets checked against %d database items and %d bytes of logs", len(secrets), len(stored), len(logs))
	})
}

// dumped is one piece of stored data.
type dumped struct {
	where    string
	data     []byte
	hexBytea bool
}

// sqliteFiles reads the database file and its WAL and shared-memory files.
func sqliteFiles(t *testing.T, dbURL string) []dumped {
	t.Helper()
	path := strings.TrimPrefix(dbURL, "sqlite:")
	matches, err := filepath.Glob(path + "*")
	if err != nil {
		t.Fatal(err)
	}
	var out []dumped
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, dumped{where: filepath.Base(m), data: b})
	}
	return out
}

// postgresColumns reads every text-like and bytea column of every table.
func postgresColumns(t *testing.T, dbURL string) []dumped {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT table_name, column_name, data_type FROM information_schema.columns
		WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea', 'ARRAY', 'USER-DEFINED')`)
	if err != nil {
		t.Fatal(err)
	}
	type col struct{ table, column, typ string }
	var cols []col
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.table, &c.column, &c.typ); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	var out []dumped
	for _, c := range cols {
		expr := `"` + c.column + `"::text`
		if c.typ == "bytea" {
			expr = `"` + c.column + `"`
		}
		r, err := db.QueryContext(ctx, `SELECT `+expr+` FROM "`+c.table+`" WHERE "`+c.column+`" IS NOT NULL`)
		if err != nil {
			t.Fatalf("%s.%s: %v", c.table, c.column, err)
		}
		var all []byte
		for r.Next() {
			var v []byte
			if err := r.Scan(&v); err != nil {
				t.Fatal(err)
			}
			all = append(append(all, v...), 0)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		out = append(out, dumped{where: c.table + "." + c.column, data: all})
	}
	// Also the whole rows as text, whatever the column types.
	tables, err := db.QueryContext(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		if err := tables.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	tables.Close()
	for _, n := range names {
		r, err := db.QueryContext(ctx, `SELECT t::text FROM "`+n+`" t`)
		if err != nil {
			t.Fatal(err)
		}
		var all []byte
		for r.Next() {
			var v []byte
			if err := r.Scan(&v); err != nil {
				t.Fatal(err)
			}
			all = append(append(all, v...), 0)
		}
		r.Close()
		out = append(out, dumped{where: n + " (rows as text)", data: all, hexBytea: true})
	}
	return out
}
