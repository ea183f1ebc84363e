package guard_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"

	"gatehouse/graph"
	"gatehouse/graph/guard"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/catalogue"
)

// EverydayQuery is the admin's everyday question: 100 FAILED deliveries
// with all their fields and the first 100 attempts of each with all of
// theirs (TestEverydayAdminQueryPasses runs it too).
const EverydayQuery = `{ webhookDeliveries(first: 100, where: {status: FAILED}) { pageInfo { hasNextPage endCursor } edges { cursor node {
  id appID eventID eventType bizData callbackURL status retryCount maxRetry nextAttemptAt leaseUntil lastError createTime updateTime
  attempts(first: 100) { edges { node {
    id deliveryID attemptNo requestHeaders requestBody responseStatus responseHeaders responseBody error durationMs startedAt
  } } }
} } } }`

// TestPrice: rows a query may return, page sizes multiplied through
// nesting, 1 000 per totalCount and per where, aliases each priced.
func TestPrice(t *testing.T) {
	schema := graph.NewExecutableSchema(graph.Config{}).Schema()
	aliases := func(n int, field string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, " a%d: %s", i, field)
		}
		return b.String() + " }"
	}
	for _, c := range []struct {
		name  string
		query string
		cost  int
	}{
		{"everyday admin query", EverydayQuery, 100 + 1000 + 100*100},
		{"scalars are free", `{ tickets(first: 10) { edges { node { id title status createdAt } } } }`, 10},
		{"root page defaults to 100", `{ tickets { edges { node { id } } } }`, 100},
		{"totalCount", `{ tickets(first: 0) { totalCount } }`, 1000},
		{"nested totalCount", `{ partnerApps(first: 10) { edges { node { orders(first: 5) { totalCount } } } } }`, 10 + 50 + 1000},
		{"where", `{ orders(first: 20, where: {status: PAID}) { edges { node { id } } } }`, 20 + 1000},
		{"object field costs a row per parent", `{ orders(first: 20) { edges { node { id app { appName } } } } }`, 20 + 20},
		{"three levels", `{ partnerApps(first: 2) { edges { node { webhookDeliveries(first: 3) { edges { node { attempts(first: 4) { edges { node { id } } } } } } } } } }`, 2 + 6 + 24},
		{"aliases", aliases(5, "tickets(first: 1) { totalCount }"), 5 * 1001},
		{"fragments each time they are used", `{ a: tickets(first: 3) { ...F } b: tickets(first: 3) { ...F } } fragment F on TicketConnection { totalCount }`, 2 * 1003},
		{"a schema", `{ __schema { types { name fields { name } } } }`, guard.SchemaCost},
		{"a type", `{ __type(name: "Order") { fields { name } } }`, guard.TypeCost},
		{"__typename is free", `{ __typename tickets(first: 1) { __typename } }`, 1},
		{"aliased schemas", aliases(3, "__schema { queryType { name } }"), 3 * guard.SchemaCost},
		{"the webhook catalogue: as many rows as it may hold", `{ webhookEventTypes { name schema } }`, catalogue.MaxCustomTypes},
		{"an app's webhook endpoints: as many as it may have", `{ partnerApps(first: 10) { edges { node { webhookEndpoints { url breaker } } } } }`, 10 + 10*webhook.MaxEndpoints},
		{"a mutation", `mutation { createSku(input: {name: "x", stock: 1}) { id } }`, guard.MutationCost},
		{"aliased mutations", `mutation { a: payOrder(orderNo: "1") { id app { id } } b: payOrder(orderNo: "2") { id } }`, 2*guard.MutationCost + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc, errs := gqlparser.LoadQueryWithRules(schema, c.query, nil)
			if errs != nil {
				t.Fatal(errs)
			}
			got, err := guard.Price(doc, doc.Operations[0], nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.cost {
				t.Fatalf("cost %d, want %d", got, c.cost)
			}
		})
	}
	t.Run("800 aliased totalCounts are over the budget", func(t *testing.T) {
		doc, errs := gqlparser.LoadQueryWithRules(schema, aliases(800, "tickets { totalCount }"), nil)
		if errs != nil {
			t.Fatal(errs)
		}
		if got, err := guard.Price(doc, doc.Operations[0], nil); err != nil || got <= guard.MaxCost {
			t.Fatalf("cost %d (%v), want over %d", got, err, guard.MaxCost)
		}
	})
}
