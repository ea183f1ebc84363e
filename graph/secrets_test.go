package graph_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/config"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

const introspectionQuery = `{ __schema { queryType { name } types { name kind
  fields { name args { name defaultValue type { ...T } } type { ...T } }
  inputFields { name }
} } }
fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }`

type ischema struct {
	QueryType struct{ Name string } `json:"queryType"`
	Types     []itype               `json:"types"`
}

type itype struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Fields      []ifield `json:"fields"`
	InputFields []struct {
		Name string `json:"name"`
	} `json:"inputFields"`
}

type ifield struct {
	Name string `json:"name"`
	Args []struct {
		Name         string  `json:"name"`
		DefaultValue *string `json:"defaultValue"`
		Type         itypeRef
	} `json:"args"`
	Type itypeRef `json:"type"`
}

type itypeRef struct {
	Kind   string    `json:"kind"`
	Name   string    `json:"name"`
	OfType *itypeRef `json:"ofType"`
}

// named unwraps NON_NULL and LIST.
func (r itypeRef) named() itypeRef {
	for r.OfType != nil && (r.Kind == "NON_NULL" || r.Kind == "LIST") {
		r = *r.OfType
	}
	return r
}

// sensitiveName matches field names that would hold a secret or a hash.
var sensitiveName = regexp.MustCompile(`(?i)secret|hash|password|sealed|token|signature`)

// allowedSensitive are the fields whose names match but which are meant
// to be there: secrets shown once in mutation payloads, the password of a
// new user, and the times at which a rotated-out secret stops working.
func allowedSensitive(typ, field string) bool {
	switch typ + "." + field {
	case "PartnerAppSecretPayload.appSecret", "PartnerAppSecretPayload.webhookSecret", "CreateUserInput.password",
		"WebhookEndpointSecretPayload.secret": // shown once, when created or rotated
		return true
	}
	return strings.HasPrefix(field, "previousSecretExpiresAt") || strings.HasPrefix(field, "previousWebhookSecretExpiresAt") ||
		strings.HasPrefix(field, "tokensRevokedAt") // when a user's tokens were last revoked
}

// TestNoSecretsReachable: driven by introspection. No type or input has a
// field for a secret or hash, and a crawl of every query field — every
// connection, with every scalar field of its nodes and of the objects and
// connections under them — returns none of the secrets, keys, hashes or
// sealed values that exist in the database. The audit log, which records
// every mutation above (those that carried a password or returned a secret
// or key, and refused ones), holds none of them either, read through
// GraphQL and straight from the table.
func TestNoSecretsReachable(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		const paymentKey, paymentSecret = "payment-api-key-for-the-crawl", "payment-secret-for-the-crawl"
		a := graphtest.StartAdmin(t, b, func(c *config.Config) {
			c.Webhooks.AllowPrivate = true
			c.Payments.URL, c.Payments.APIKey, c.Payments.Secret = "http://127.0.0.1:9/pay", paymentKey, paymentSecret
		})
		ctx := context.Background()
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
		t.Cleanup(sink.Close)

		// Seed one of everything, keeping every secret that was shown.
		forbidden := []string{paymentKey, paymentSecret}
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{
			"appName": "Secretive", "appKey": "secretive", "callbackURL": sink.URL + "/h",
			"redirectURIs": []string{"https://p.example.com/cb"}, "scopes": []string{"orders:read"},
		}}).OK(t, "createPartnerApp")
		appID := graphtest.Str(p, "app", "id")
		forbidden = append(forbidden, graphtest.Str(p, "appSecret"), graphtest.Str(p, "webhookSecret"))
		r := a.GQL(t, `mutation($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret } }`, map[string]any{"id": appID}).OK(t, "rotatePartnerAppSecret")
		forbidden = append(forbidden, graphtest.Str(r, "appSecret"))
		r = a.GQL(t, `mutation($id: ID!) { rotateWebhookSecret(id: $id) { webhookSecret } }`, map[string]any{"id": appID}).OK(t, "rotateWebhookSecret")
		forbidden = append(forbidden, graphtest.Str(r, "webhookSecret"))
		k := a.GQL(t, `mutation { createAPIKey(name: "crawler") { key } }`, nil).OK(t, "createAPIKey")
		forbidden = append(forbidden, a.Key, graphtest.Str(k, "key"), secret.HashToken(a.Key), secret.HashToken(graphtest.Str(k, "key")))
		const password = "pa55word-for-the-crawl"
		u := a.GQL(t, `mutation($pw: String!) { createUser(input: {username: "crawled", password: $pw, roles: ["admin"]}) { id } }`, map[string]any{"pw": password}).OK(t, "createUser")
		forbidden = append(forbidden, password)
		// Passwords and keys in mutations that succeed and that are refused
		// (bad input, a READ_ONLY key): none may reach the audit log.
		const newPassword, refusedPassword, readOnlyPassword = "new-pa55word-of-crawled", "refused-pa55word", "read-only-pa55word"
		a.GQL(t, `mutation($id: ID!, $pw: String!) { setUserPassword(id: $id, password: $pw) { id } }`, map[string]any{"id": graphtest.Str(u, "id"), "pw": newPassword}).OK(t, "setUserPassword")
		a.GQL(t, `mutation($pw: String!) { createUser(input: {username: "bad name", password: $pw}) { id } }`, map[string]any{"pw": refusedPassword}).Fails(t, "VALIDATION_FAILED")
		ro := a.GQL(t, `mutation { createAPIKey(name: "crawler-ro", role: READ_ONLY) { key } }`, nil).OK(t, "createAPIKey")
		graphtest.GQLAs(t, a.Env, graphtest.Str(ro, "key"), `mutation($id: ID!, $pw: String!) { setUserPassword(id: $id, password: $pw) { id } }`,
			map[string]any{"id": graphtest.Str(u, "id"), "pw": readOnlyPassword}).Fails(t, "FORBIDDEN")
		forbidden = append(forbidden, newPassword, refusedPassword, readOnlyPassword, graphtest.Str(ro, "key"), secret.HashToken(graphtest.Str(ro, "key")))
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "SEC-1", amount: "3.30", customerEmail: "c@example.com"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		a.GQL(t, `mutation { payOrder(orderNo: "SEC-1") { id } }`, nil).OK(t, "payOrder")
		sku := a.GQL(t, `mutation { createSku(input: {name: "mug", stock: 3}) { id } }`, nil).OK(t, "createSku")
		// Partner calls with the current secret: an API usage row and an
		// idempotency record.
		pc := partnerclient.New(a.PublicURL, "secretive", forbidden[4])
		if _, err := pc.OrderV2(ctx, "SEC-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := pc.Deduct(ctx, partnerclient.DeductRequest{BizNo: "SEC-BIZ-1", SkuID: int64(graphtest.IntID(t, sku, "id")), Quantity: 1}); err != nil {
			t.Fatal(err)
		}
		if err := a.App.Usage.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if r := a.Do(t, "POST", a.PublicURL+"/api/tickets", `{"title":"crawl me"}`, "Content-Type", "application/json"); r.Status != 201 {
			t.Fatalf("ticket: %d", r.Status)
		}
		graphtest.Eventually(t, 10*time.Second, "the webhook is delivered", func() bool {
			r := a.GQL(t, `{ webhookDeliveries(where: {status: SUCCESS}) { totalCount } }`, nil).OK(t, "webhookDeliveries")
			return graphtest.Num(r, "totalCount") == 1
		})
		// What storage holds: sealed secrets and hashes, in every spelling.
		appRow, err := a.App.DB.PartnerApp.Get(ctx, graphtest.IntID(t, p, "app", "id"))
		if err != nil {
			t.Fatal(err)
		}
		for _, sealed := range [][]byte{appRow.Secret, deref(appRow.PreviousSecret), deref(appRow.WebhookSecret), deref(appRow.PreviousWebhookSecret)} {
			if len(sealed) == 0 {
				t.Fatal("a sealed secret is missing from the test data")
			}
			forbidden = append(forbidden, base64.StdEncoding.EncodeToString(sealed), base64.RawURLEncoding.EncodeToString(sealed), hex.EncodeToString(sealed))
		}
		users, err := a.App.DB.User.Query().All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			forbidden = append(forbidden, u.PasswordHash)
		}
		for _, s := range forbidden[2:6] { // the base64 part of whsec_ secrets alone
			forbidden = append(forbidden, strings.TrimPrefix(s, "whsec_"))
		}

		var schema struct {
			Schema ischema `json:"__schema"`
		}
		res := a.GQL(t, introspectionQuery, nil)
		if res.Status != 200 || len(res.Errors) > 0 {
			t.Fatalf("introspection: %s", res.Body)
		}
		decodeInto(t, res.Data, &schema)
		types := map[string]itype{}
		for _, ty := range schema.Schema.Types {
			types[ty.Name] = ty
			if ty.Name == "Mutation" {
				continue // operation names, not data: rotatePartnerAppSecret is fine
			}
			for _, f := range ty.Fields {
				if sensitiveName.MatchString(f.Name) && !allowedSensitive(ty.Name, f.Name) {
					t.Errorf("%s.%s looks like a secret", ty.Name, f.Name)
				}
			}
			for _, f := range ty.InputFields {
				if sensitiveName.MatchString(f.Name) && !allowedSensitive(ty.Name, f.Name) {
					t.Errorf("input %s.%s looks like a secret", ty.Name, f.Name)
				}
			}
		}

		crawled := 0
		for _, f := range types[schema.Schema.QueryType.Name].Fields {
			named := f.Type.named()
			connection := strings.HasSuffix(named.Name, "Connection")
			if !connection && (named.Kind != "OBJECT" || hasRequiredArg(f)) {
				t.Errorf("query field %s is neither a connection nor an object without arguments: extend the crawl", f.Name)
				continue
			}
			args := ""
			if connection {
				args = "(first: 20)"
			}
			q := "{ " + f.Name + args + " " + selection(types, named.Name, 0) + " }"
			res := a.GQL(t, q, nil)
			if res.Status != 200 || len(res.Errors) > 0 {
				t.Fatalf("crawl %s: %s\n%s", f.Name, res.Body, q)
			}
			if connection && !strings.Contains(res.Body, `"node"`) {
				t.Errorf("crawl %s returned no rows: the test data misses a type", f.Name)
			}
			for _, s := range forbidden {
				if s != "" && strings.Contains(res.Body, s) {
					t.Errorf("%s exposes a secret or hash (%.6s…)", f.Name, s)
				}
			}
			crawled++
		}
		if crawled < 9 {
			t.Fatalf("crawled %d query fields", crawled)
		}

		// The audit table itself, every column of every row.
		events, err := a.App.DB.AuditEvent.Query().All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) < 12 {
			t.Fatalf("%d audit events for the setup's mutations", len(events))
		}
		for _, e := range events {
			b, err := json.Marshal(e) // every column, pointers followed
			if err != nil {
				t.Fatal(err)
			}
			row := string(b)
			for _, s := range forbidden {
				if s != "" && strings.Contains(row, s) {
					t.Errorf("audit event %d holds a secret, key, password or hash (%.6s…)", e.ID, s)
				}
			}
		}
	})
}

// selection selects every field of type name that needs no argument, and
// connections with first: 5, down to five levels of objects (a node's
// connections, their edges and nodes).
func selection(types map[string]itype, name string, depth int) string {
	ty := types[name]
	var parts []string
	for _, f := range ty.Fields {
		ft := f.Type.named()
		if hasRequiredArg(f) {
			continue
		}
		switch ft.Kind {
		case "SCALAR", "ENUM":
			parts = append(parts, f.Name)
		case "OBJECT", "INTERFACE":
			if depth >= 5 {
				continue
			}
			args := ""
			if strings.HasSuffix(ft.Name, "Connection") {
				args = "(first: 5)"
			}
			parts = append(parts, f.Name+args+" "+selection(types, ft.Name, depth+1))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "__typename")
	}
	return "{ " + strings.Join(parts, " ") + " }"
}

func hasRequiredArg(f ifield) bool {
	for _, a := range f.Args {
		if a.Type.Kind == "NON_NULL" && a.DefaultValue == nil {
			return true
		}
	}
	return false
}

func deref(b *[]byte) []byte {
	if b == nil {
		return nil
	}
	return *b
}

func decodeInto(t testing.TB, data map[string]any, v any) {
	t.Helper()
	if err := graphtest.Remarshal(data, v); err != nil {
		t.Fatal(fmt.Errorf("decode: %w", err))
	}
}
