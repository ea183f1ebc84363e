package guard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/graph/graphtest"
	"gatehouse/graph/guard"
	"gatehouse/internal/testenv"
)

// TestQueryLimits: page sizes, nested connections, depth, complexity,
// body size; introspection and ordinary queries stay within them.
func TestQueryLimits(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		ctx := context.Background()
		for i := range 105 {
			if _, err := a.App.Tickets.Create(ctx, fmt.Sprintf("ticket %d", i)); err != nil {
				t.Fatal(err)
			}
		}

		t.Run("default page is 100", func(t *testing.T) {
			r := a.GQL(t, `{ tickets { totalCount pageInfo { hasNextPage } edges { node { id } } } }`, nil).OK(t, "tickets")
			if n := len(graphtest.Dig(r, "edges").([]any)); n != 100 || graphtest.Num(r, "totalCount") != 105 || graphtest.Dig(r, "pageInfo", "hasNextPage") != true {
				t.Fatalf("%d edges of %d", n, graphtest.Num(r, "totalCount"))
			}
		})
		t.Run("first 100 and last 100 are fine", func(t *testing.T) {
			a.GQL(t, `{ tickets(first: 100) { edges { node { id } } } }`, nil).OK(t, "tickets")
			a.GQL(t, `{ tickets(last: 100) { edges { node { id } } } }`, nil).OK(t, "tickets")
		})
		for name, q := range map[string]string{
			"first 101":           `{ tickets(first: 101) { totalCount } }`,
			"last 101":            `{ tickets(last: 101) { totalCount } }`,
			"negative first":      `{ tickets(first: -1) { totalCount } }`,
			"first in variables":  `query($n: Int) { tickets(first: $n) { totalCount } }`,
			"nested first 1000":   `{ partnerApps(first: 1) { edges { node { orders(first: 1000) { totalCount } } } } }`,
			"nested without page": `{ partnerApps(first: 5) { edges { node { orders { edges { node { id } } } } } } }`,
		} {
			t.Run(name, func(t *testing.T) {
				r := a.GQL(t, q, map[string]any{"n": 500})
				e := r.Fails(t, "VALIDATION_FAILED")
				if r.Data["tickets"] != nil || r.Data["partnerApps"] != nil || !strings.Contains(e.Message, "first") && !strings.Contains(e.Message, "last") {
					t.Fatalf("%s", r.Body)
				}
			})
		}
		t.Run("too costly", func(t *testing.T) {
			// 100 apps × 100 deliveries × 100 attempts: a million rows.
			q := `{ partnerApps(first: 100) { edges { node { webhookDeliveries(first: 100) { edges { node { attempts(first: 100) { edges { node { id } } } } } } } } } }`
			e := a.GQL(t, q, nil).Fails(t, "QUERY_TOO_COMPLEX")
			if !strings.Contains(e.Message, "complex") || graphtest.Num(e.Extensions, "limit") != 50000 {
				t.Fatalf("%+v", e)
			}
			// 100 apps × 100 orders is 10 100 rows: within the budget.
			a.GQL(t, `{ partnerApps(first: 100) { edges { node { orders(first: 100) { edges { node { id orderNo amount } } } } } } }`, nil).OK(t, "partnerApps")
		})
		t.Run("aliased totalCounts are each priced and refused before running", func(t *testing.T) {
			var q strings.Builder
			q.WriteString("{")
			for i := range 800 {
				fmt.Fprintf(&q, " c%d: tickets { totalCount }", i)
			}
			q.WriteString(" }")
			r := a.GQL(t, q.String(), nil)
			e := r.Fails(t, "QUERY_TOO_COMPLEX")
			if r.Data != nil || graphtest.Num(e.Extensions, "cost") <= 50000 {
				t.Fatalf("%s", r.Body)
			}
		})
		t.Run("too deep", func(t *testing.T) {
			// order → app → orders → … nests without end; 13 levels is refused.
			q := `{ orders(first: 1) { edges { node { app { orders(first: 1) { edges { node { app { orders(first: 1) { edges { node { app { id } } } } } } } } } } } } }`
			e := a.GQL(t, q, nil).Fails(t, "QUERY_TOO_COMPLEX")
			if !strings.Contains(e.Message, "deep") {
				t.Fatal(e.Message)
			}
		})
		t.Run("fragments count", func(t *testing.T) {
			q := `{ partnerApps(first: 100) { ...A } } fragment A on PartnerAppConnection { edges { node { orders(first: 100) { edges { node { app { orders(first: 100) { totalCount } } } } } } } }`
			a.GQL(t, q, nil).Fails(t, "QUERY_TOO_COMPLEX")
		})
		t.Run("introspection", func(t *testing.T) {
			r := a.GQL(t, graphiQLIntrospection, nil)
			if r.Status != 200 || len(r.Errors) > 0 || !strings.Contains(r.Body, `"PartnerAppSecretPayload"`) {
				t.Fatalf("HTTP %d: %.300s", r.Status, r.Body)
			}
		})
		t.Run("where conditions and texts are bounded", func(t *testing.T) {
			// 1 200 conditions in or: an expression tree SQLite refuses
			// (internal error there); the front door says what is wrong.
			or := make([]any, 1200)
			for i := range or {
				or[i] = map[string]any{"titleContainsFold": fmt.Sprint("no such title ", i)}
			}
			q := `query($w: TicketWhereInput) { tickets(first: 1, where: $w) { totalCount } }`
			e := a.GQL(t, q, map[string]any{"w": map[string]any{"or": or}}).Fails(t, "VALIDATION_FAILED")
			if !strings.Contains(e.Message, "conditions") {
				t.Fatalf("%+v", e)
			}
			var lit strings.Builder
			for i := range 300 {
				fmt.Fprintf(&lit, `{id: %d} `, i+1)
			}
			a.GQL(t, `{ tickets(first: 1, where: {or: [`+lit.String()+`]}) { totalCount } }`, nil).Fails(t, "VALIDATION_FAILED")
			// A text of 50 001 bytes: a LIKE pattern SQLite refuses.
			long := map[string]any{"w": map[string]any{"titleContains": strings.Repeat("a", 50_001)}}
			if e := a.GQL(t, q, long).Fails(t, "VALIDATION_FAILED"); !strings.Contains(e.Message, "bytes") {
				t.Fatalf("%+v", e)
			}
			a.GQL(t, q, map[string]any{"w": map[string]any{"titleContains": strings.Repeat("a", 4096)}}).OK(t, "tickets")
			// 200 are answered on both databases; a long list of values is one condition.
			r := a.GQL(t, q, map[string]any{"w": map[string]any{"or": or[:199]}}).OK(t, "tickets")
			if graphtest.Num(r, "totalCount") != 0 {
				t.Fatalf("%v", r)
			}
			ids := make([]any, 5000)
			for i := range ids {
				ids[i] = fmt.Sprint(i + 1)
			}
			r = a.GQL(t, `query($ids: [ID!]) { tickets(first: 1, where: {idIn: $ids}) { totalCount } }`, map[string]any{"ids": ids}).OK(t, "tickets")
			if graphtest.Num(r, "totalCount") != 105 {
				t.Fatalf("%v", r)
			}
		})
		t.Run("aliased introspection is priced", func(t *testing.T) {
			// Each copy of the schema is hundreds of kilobytes of JSON; a
			// 64 KiB body holds thousands of aliases. Any key may ask.
			var q strings.Builder
			q.WriteString("{")
			for i := range 100 {
				fmt.Fprintf(&q, " s%d: __schema { ...S }", i)
			}
			q.WriteString(" } fragment S on __Schema { types { name fields { name args { name } } inputFields { name } } }")
			r := a.GQL(t, q.String(), nil)
			e := r.Fails(t, "QUERY_TOO_COMPLEX")
			if r.Data != nil || graphtest.Num(e.Extensions, "cost") <= 50000 {
				t.Fatalf("%.300s", r.Body)
			}
			q.Reset()
			q.WriteString("{")
			for i := range 60 {
				fmt.Fprintf(&q, ` t%d: __type(name: "PartnerApp") { fields { name } }`, i)
			}
			q.WriteString(" }")
			a.GQL(t, q.String(), nil).Fails(t, "QUERY_TOO_COMPLEX")
			// One schema, a few types and __typename anywhere stay free enough.
			a.GQL(t, `{ __typename __schema { queryType { name } } a: __type(name: "Order") { name } b: __type(name: "Sku") { name } tickets(first: 1) { __typename } }`, nil).OK(t, "__schema")
		})
		t.Run("mutations per operation are bounded", func(t *testing.T) {
			// One request, thousands of aliased mutations: thousands of
			// writes, webhooks and audit events. 50 fit; 51 run nothing.
			count := func() int {
				return graphtest.Num(a.GQL(t, `{ skus(first: 0) { totalCount } auditEvents(first: 0) { totalCount } }`, nil).Data, "auditEvents", "totalCount")
			}
			var q strings.Builder
			q.WriteString("mutation {")
			for i := range 51 {
				fmt.Fprintf(&q, ` m%d: createSku(input: {name: "bulk %d", stock: 1}) { id }`, i, i)
			}
			q.WriteString(" }")
			before := count()
			r := a.GQL(t, q.String(), nil)
			e := r.Fails(t, "QUERY_TOO_COMPLEX")
			if r.Data != nil || graphtest.Num(e.Extensions, "cost") <= 50000 || !strings.Contains(e.Message, "mutation") {
				t.Fatalf("%.300s", r.Body)
			}
			// Refused before running: no SKU, and one REFUSED event per
			// mutation field (refusals_test.go checks them).
			skus := graphtest.Num(a.GQL(t, `{ skus(first: 0) { totalCount } }`, nil).Data, "skus", "totalCount")
			if after := count(); after != before+51 || skus != 0 {
				t.Fatalf("51 mutations refused: audit events %d → %d (want +51) and %d SKUs", before, after, skus)
			}
			before = count()
			// 50 run, each audited.
			q.Reset()
			q.WriteString("mutation {")
			for i := range 50 {
				fmt.Fprintf(&q, ` m%d: createSku(input: {name: "bulk %d", stock: 1}) { id }`, i, i)
			}
			q.WriteString(" }")
			if r := a.GQL(t, q.String(), nil); r.Status != 200 || len(r.Errors) > 0 {
				t.Fatalf("50 mutations: HTTP %d %.300s", r.Status, r.Body)
			}
			if after := count(); after != before+50 {
				t.Fatalf("audit events %d → %d, want +50", before, after)
			}
		})
		t.Run("body over 64 KiB", func(t *testing.T) {
			big := `{"query":"{ tickets { totalCount } }","variables":{"pad":"` + strings.Repeat("x", 70<<10) + `"}}`
			r := a.Do(t, "POST", a.AdminURL+"/graphql", big, "Content-Type", "application/json", "X-API-Key", a.Key)
			if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Body), "payload_too_large") {
				t.Fatalf("with Content-Length: %d %s", r.Status, r.Body)
			}
			// Chunked, so the size is only known while reading.
			req, _ := http.NewRequest("POST", a.AdminURL+"/graphql", io.MultiReader(strings.NewReader(big)))
			req.ContentLength = -1
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", a.Key)
			resp, err := a.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "payload_too_large") {
				t.Fatalf("chunked: %d %s", resp.StatusCode, body)
			}
		})
	})
}

// graphiQLIntrospection is the introspection query GraphiQL sends.
const graphiQLIntrospection = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } }
}`

// TestEverydayAdminQueryPasses: 100 FAILED deliveries with all their
// fields and attempts(first: 100) with all of theirs is answered in full.
func TestEverydayAdminQueryPasses(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		ctx := context.Background()
		c := a.App.DB.Client
		app, err := c.PartnerApp.Create().SetAppName("p").SetAppKey("p").SetSecret([]byte("x")).Save(ctx)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		for i := range 101 {
			d, err := c.WebhookDelivery.Create().SetAppID(app.ID).SetEventID(fmt.Sprintf("msg_%d", i)).
				SetEventType("order.paid").SetBizData(`{}`).SetCallbackURL("https://partner.example/hook").
				SetStatus(webhookdelivery.StatusFAILED).SetRetryCount(5).SetNextAttemptAt(now).Save(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= 6; n++ {
				if _, err := c.DeliveryAttempt.Create().SetDeliveryID(d.ID).SetAttemptNo(n).SetRequestHeaders("{}").
					SetRequestBody("{}").SetResponseStatus(500).SetDurationMs(3).Save(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := a.GQL(t, EverydayQuery, nil).OK(t, "webhookDeliveries")
		edges := graphtest.Dig(r, "edges").([]any)
		if len(edges) != 100 || graphtest.Dig(r, "pageInfo", "hasNextPage") != true {
			t.Fatalf("%d edges", len(edges))
		}
		for _, e := range edges {
			if n := len(graphtest.Dig(e, "node", "attempts", "edges").([]any)); n != 6 {
				t.Fatalf("%d attempts", n)
			}
		}
	})
}

// A document is bounded before it is validated: validation compares
// same-named fields pairwise, so thousands of them (64 KiB of __typename)
// kept a core busy for seconds. Too many same-named fields, too many
// fields (fragments counted each time they are spread) or too many tokens
// get an immediate error; distinct aliases and GraphiQL's introspection
// still pass.
func TestDocumentBounds(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		t.Run("same-named fields", func(t *testing.T) {
			r := a.GQL(t, "{"+strings.Repeat(" __typename", 5900)+" }", nil)
			e := r.Fails(t, "QUERY_TOO_COMPLEX")
			if r.Status != http.StatusUnprocessableEntity || graphtest.Num(e.Extensions, "limit") != guard.MaxSameNamePairs {
				t.Fatalf("HTTP %d: %.300s", r.Status, r.Body)
			}
			// Nested: 40 copies of one connection, each with 40 copies of a field,
			// merge into 1 600 same-named fields.
			nested := "{" + strings.Repeat(" tickets(first: 1) { edges { node {"+strings.Repeat(" id", 40)+" } } }", 40) + " }"
			a.GQL(t, nested, nil).Fails(t, "QUERY_TOO_COMPLEX")
			// The same through GET.
			g := a.Do(t, "GET", a.AdminURL+"/graphql?query="+url.QueryEscape("{"+strings.Repeat(" __typename", 400)+" }"), "", "X-API-Key", a.Key)
			if g.Status != http.StatusUnprocessableEntity || !strings.Contains(string(g.Body), "QUERY_TOO_COMPLEX") {
				t.Fatalf("GET: HTTP %d: %.300s", g.Status, g.Body)
			}
		})
		t.Run("fragments doubling", func(t *testing.T) {
			// F0 has 2 fields; each Fi spreads F(i-1) twice: F30 expands to 2^31.
			var q strings.Builder
			q.WriteString("{ ...F30 }\nfragment F0 on Query { a: __typename b: __typename }\n")
			for i := 1; i <= 30; i++ {
				fmt.Fprintf(&q, "fragment F%d on Query { ...F%d ...F%d }\n", i, i-1, i-1)
			}
			r := a.GQL(t, q.String(), nil)
			if e := r.Fails(t, "QUERY_TOO_COMPLEX"); graphtest.Num(e.Extensions, "limit") != guard.MaxFields && graphtest.Num(e.Extensions, "limit") != guard.MaxSameNamePairs {
				t.Fatalf("%.300s", r.Body)
			}
		})
		t.Run("many tokens", func(t *testing.T) {
			// 22 500 tokens but few fields: the parser stops at MaxTokens.
			r := a.GQL(t, "{ tickets("+strings.Repeat("first:1 ", 7500)+") { totalCount } }", nil)
			if r.Status == 200 || len(r.Errors) == 0 || !strings.Contains(r.Body, "token limit") {
				t.Fatalf("HTTP %d: %.300s", r.Status, r.Body)
			}
		})
		t.Run("introspection, aliases and 300 same-named fields pass", func(t *testing.T) {
			a.GQL(t, graphiQLIntrospection, nil).OK(t, "__schema")
			a.GQL(t, "{"+strings.Repeat(" __typename", 300)+" }", nil).OK(t, "__typename")
			var q strings.Builder
			q.WriteString("{")
			for i := range 3000 {
				fmt.Fprintf(&q, " t%d: __typename", i)
			}
			q.WriteString(" }")
			if r := a.GQL(t, q.String(), nil); r.Status != 200 || len(r.Errors) > 0 {
				t.Fatalf("3 000 aliases: HTTP %d %.200s", r.Status, r.Body)
			}
		})
	})
}
