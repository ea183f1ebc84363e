package graph_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent/auditevent"
	"gatehouse/graph/graphtest"
	"gatehouse/internal/config"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

const mutationsIntrospection = `{ __schema {
  mutationType { fields { name args { name type { ...T } } type { ...T } } }
  types { name kind interfaces { name } fields { name type { ...T } } inputFields { name type { ...T } } enumValues { name } }
} }
fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }`

type mtype struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Interfaces []struct {
		Name string `json:"name"`
	} `json:"interfaces"`
	Fields []struct {
		Name string   `json:"name"`
		Type itypeRef `json:"type"`
	} `json:"fields"`
	InputFields []struct {
		Name string   `json:"name"`
		Type itypeRef `json:"type"`
	} `json:"inputFields"`
	EnumValues []struct {
		Name string `json:"name"`
	} `json:"enumValues"`
}

type mfield struct {
	Name string `json:"name"`
	Args []struct {
		Name string   `json:"name"`
		Type itypeRef `json:"type"`
	} `json:"args"`
	Type itypeRef `json:"type"`
}

// mutationSchema is the Mutation type and every type, read by
// introspection (so that mutations added later are enumerated too).
type mutationSchema struct {
	Mutations []mfield
	Types     map[string]mtype
}

func introspectMutations(t *testing.T, a *graphtest.Admin, key string) mutationSchema {
	t.Helper()
	var out struct {
		Schema struct {
			MutationType struct {
				Fields []mfield `json:"fields"`
			} `json:"mutationType"`
			Types []mtype `json:"types"`
		} `json:"__schema"`
	}
	res := graphtest.GQLAs(t, a.Env, key, mutationsIntrospection, nil)
	if res.Status != 200 || len(res.Errors) > 0 {
		t.Fatalf("introspection: %s", res.Body)
	}
	decodeInto(t, res.Data, &out)
	ms := mutationSchema{Mutations: out.Schema.MutationType.Fields, Types: map[string]mtype{}}
	for _, ty := range out.Schema.Types {
		ms.Types[ty.Name] = ty
	}
	return ms
}

// entityOf is the Node type a mutation acts on: the type it returns, or
// the Node-typed field of the payload it returns.
func (ms mutationSchema) entityOf(f mfield) string {
	isNode := func(name string) bool {
		return slices.ContainsFunc(ms.Types[name].Interfaces, func(i struct {
			Name string `json:"name"`
		}) bool {
			return i.Name == "Node"
		})
	}
	name := f.Type.named().Name
	if isNode(name) {
		return name
	}
	for _, pf := range ms.Types[name].Fields {
		if isNode(pf.Type.named().Name) {
			return pf.Type.named().Name
		}
	}
	return ""
}

// seeded are the ids of existing rows a mutation may name, by type.
type seeded struct {
	ids     map[string]string // GraphQL type → id
	orderNo string
}

// literal writes a GraphQL literal for a value of type ref: real ids and
// an order number of the test data, so that a mutation let through by mistake
// would really change something.
func (ms mutationSchema) literal(ref itypeRef, argName, entity string, s seeded) string {
	switch ref.Kind {
	case "NON_NULL":
		return ms.literal(*ref.OfType, argName, entity, s)
	case "LIST":
		return "[]"
	case "ENUM":
		return ms.Types[ref.Name].EnumValues[0].Name
	case "INPUT_OBJECT":
		var parts []string
		for _, f := range ms.Types[ref.Name].InputFields {
			if f.Type.Kind == "NON_NULL" {
				// "in:": a field of an input, which names a new row
				// (createOrder's orderNo) rather than an existing one.
				parts = append(parts, f.Name+": "+ms.literal(f.Type, "in:"+f.Name, entity, s))
			}
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	switch ref.Name {
	case "ID":
		if strings.TrimPrefix(argName, "in:") == "appID" {
			return strconv.Quote(s.ids["PartnerApp"])
		}
		if id, ok := s.ids[entity]; ok {
			return strconv.Quote(id)
		}
		return `"1"`
	case "Int":
		return "1"
	case "Float":
		return "1.5"
	case "Boolean":
		return "true"
	case "Time":
		return `"2031-01-01"`
	case "JSON":
		return "{}"
	}
	if argName == "orderNo" {
		return strconv.Quote(s.orderNo)
	}
	switch name := strings.TrimPrefix(argName, "in:"); name {
	case "amount":
		return `"1.00"`
	case "password":
		return `"read-only-password-1"`
	default:
		return `"ro-` + name + `"`
	}
}

// call writes a whole mutation document for f.
func (ms mutationSchema) call(f mfield, s seeded) string {
	entity := ms.entityOf(f)
	var args []string
	for _, a := range f.Args {
		if a.Type.Kind == "NON_NULL" {
			args = append(args, a.Name+": "+ms.literal(a.Type, a.Name, entity, s))
		}
	}
	doc := "mutation { " + f.Name
	if len(args) > 0 {
		doc += "(" + strings.Join(args, ", ") + ")"
	}
	if k := f.Type.named().Kind; k == "OBJECT" || k == "INTERFACE" {
		doc += " { __typename }"
	}
	return doc + " }"
}

// TestReadOnlyKeyRefusedEveryMutation: every mutation of the schema, read
// by introspection so that one added later is covered without touching
// this test, is refused with FORBIDDEN for a READ_ONLY key — with real ids
// of existing rows, so that letting one through would change something —
// and the database is the same afterwards (audit log aside). Each refusal
// is in the audit log. The same key may query.
func TestReadOnlyKeyRefusedEveryMutation(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		t.Cleanup(sink.Close)

		// One row of each kind, through the API with the ADMIN key.
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Seed", "callbackURL": sink.URL + "/h"}}).OK(t, "createPartnerApp")
		appID := graphtest.Str(p, "app", "id")
		a.GQL(t, `mutation($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret } }`, map[string]any{"id": appID}).OK(t, "rotatePartnerAppSecret")
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "RO-PAID", amount: "2.00"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		a.GQL(t, `mutation { payOrder(orderNo: "RO-PAID") { id } }`, nil).OK(t, "payOrder")
		o := a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "RO-1", amount: "3.00"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		sku := a.GQL(t, `mutation { createSku(input: {name: "seed", stock: 3}) { id } }`, nil).OK(t, "createSku")
		u := a.GQL(t, `mutation { createUser(input: {username: "seeded", password: "seeded-password"}) { id } }`, nil).OK(t, "createUser")
		ro := a.GQL(t, `mutation { createAPIKey(name: "read only", role: READ_ONLY) { key apiKey { id role } } }`, nil).OK(t, "createAPIKey")
		if graphtest.Str(ro, "apiKey", "role") != "READ_ONLY" {
			t.Fatalf("createAPIKey role: %v", ro)
		}
		roKey := graphtest.Str(ro, "key")
		roID := graphtest.IntID(t, ro, "apiKey", "id")
		adminKey, err := a.App.APIKeys.Authenticate(context.Background(), a.Key)
		if err != nil {
			t.Fatal(err)
		}
		var deliveryID string
		graphtest.Eventually(t, 10*time.Second, "the test order's webhook is delivered", func() bool {
			r := a.GQL(t, `{ webhookDeliveries(where: {status: SUCCESS}) { edges { node { id } } } }`, nil).OK(t, "webhookDeliveries")
			deliveryID = graphtest.Str(r, "edges", 0, "node", "id")
			return deliveryID != ""
		})
		s := seeded{orderNo: "RO-1", ids: map[string]string{
			"PartnerApp": appID, "Order": graphtest.Str(o, "id"), "Sku": graphtest.Str(sku, "id"), "User": graphtest.Str(u, "id"),
			"APIKey": strconv.Itoa(adminKey.ID), "WebhookDelivery": deliveryID,
		}}

		// The read-only key reads.
		graphtest.GQLAs(t, a.Env, roKey, `{ partnerApps { totalCount } auditEvents(first: 1) { totalCount } }`, nil).OK(t, "partnerApps")

		ms := introspectMutations(t, a, roKey)
		names := make([]string, 0, len(ms.Mutations))
		for _, f := range ms.Mutations {
			names = append(names, f.Name)
		}
		for _, want := range []string{"createPartnerApp", "updatePartnerApp", "rotatePartnerAppSecret", "rotateWebhookSecret",
			"resendWebhookDelivery", "resendFailedWebhookDeliveries", "createSku", "setSkuStock", "createOrder", "payOrder",
			"createAPIKey", "disableAPIKey", "createUser", "enableAPIKey", "disableUser", "enableUser", "setUserPassword", "endSecretOverlap",
			"cancelOrder", "refundOrder"} {
			if !slices.Contains(names, want) {
				t.Fatalf("introspection lists no %s among %v", want, names)
			}
		}

		db := a.App.DB
		before := snapshot(t, db)
		for _, f := range ms.Mutations {
			doc := ms.call(f, s)
			res := graphtest.GQLAs(t, a.Env, roKey, doc, nil)
			if res.Status != 200 || len(res.Errors) != 1 || res.Errors[0].Code() != "FORBIDDEN" ||
				len(res.Errors[0].Path) != 1 || res.Errors[0].Path[0] != f.Name {
				t.Errorf("%s with a READ_ONLY key: HTTP %d %s\n%s", f.Name, res.Status, res.Body, doc)
			}
		}
		// Several mutations in one document: each is refused on its own.
		res := graphtest.GQLAs(t, a.Env, roKey, `mutation { a: createSku(input: {name: "x", stock: 1}) { id } b: createSku(input: {name: "y", stock: 1}) { id } }`, nil)
		if len(res.Errors) != 2 || res.Errors[0].Code() != "FORBIDDEN" || res.Errors[1].Code() != "FORBIDDEN" {
			t.Errorf("two aliased mutations: %s", res.Body)
		}
		after := snapshot(t, db)
		for table, rows := range before {
			if !slices.Equal(rows, after[table]) {
				t.Errorf("table %s changed under a READ_ONLY key:\nbefore %v\nafter  %v", table, rows, after[table])
			}
		}

		// Every refusal is in the audit log, with the key and the code.
		events, err := db.AuditEvent.Query().Where(auditevent.APIKeyID(roID)).All(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		refused := map[string]int{}
		for _, e := range events {
			if e.Outcome != auditevent.OutcomeREFUSED || e.ErrorCode == nil || *e.ErrorCode != "FORBIDDEN" || e.APIKeyName != "read only" {
				t.Errorf("audit event %+v", e)
			}
			refused[e.Mutation]++
		}
		for _, n := range names {
			if refused[n] == 0 {
				t.Errorf("no audit event for the refused %s", n)
			}
		}
		if refused["createSku"] != 3 { // once alone, twice aliased
			t.Errorf("createSku refusals recorded: %d", refused["createSku"])
		}
	})
}

// snapshot reads every row of every table but the audit log, as text
// (API key usage counts, updated in the background by every accepted
// request, are left out).
func snapshot(t *testing.T, db *store.DB) map[string][]string {
	t.Helper()
	ctx := context.Background()
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if db.Dialect == dialect.Postgres {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`
	}
	tables, err := queryStrings(ctx, db.SQL, q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, table := range tables {
		if table == "audit_events" {
			continue
		}
		rows, err := db.SQL.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		out[table] = []string{}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i, c := range cols {
				if table == "api_keys" && (c == "usage_count" || c == "last_used_at") {
					continue
				}
				v := vals[i]
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%s=%v ", c, v)
			}
			out[table] = append(out[table], b.String())
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(out[table])
	}
	if len(out) < 10 {
		t.Fatalf("snapshot found %d tables", len(out))
	}
	return out
}

func queryStrings(ctx context.Context, db *sql.DB, q string) ([]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
