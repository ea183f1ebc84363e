package graph_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"gatehouse/internal/testenv"
)

// TestQueryLimits: page sizes, nested connections, depth, complexity,
// body size; introspection and ordinary queries stay within them.
func TestQueryLimits(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		ctx := context.Background()
		for i := range 105 {
			if _, err := a.App.Tickets.Create(ctx, fmt.Sprintf("ticket %d", i)); err != nil {
				t.Fatal(err)
			}
		}

		t.Run("default page is 100", func(t *testing.T) {
			r := a.gql(t, `{ tickets { totalCount pageInfo { hasNextPage } edges { node { id } } } }`, nil).ok(t, "tickets")
			if n := len(dig(r, "edges").([]any)); n != 100 || num(r, "totalCount") != 105 || dig(r, "pageInfo", "hasNextPage") != true {
				t.Fatalf("%d edges of %d", n, num(r, "totalCount"))
			}
		})
		t.Run("first 100 and last 100 are fine", func(t *testing.T) {
			a.gql(t, `{ tickets(first: 100) { edges { node { id } } } }`, nil).ok(t, "tickets")
			a.gql(t, `{ tickets(last: 100) { edges { node { id } } } }`, nil).ok(t, "tickets")
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
				r := a.gql(t, q, map[string]any{"n": 500})
				e := r.fails(t, "VALIDATION_FAILED")
				if r.Data["tickets"] != nil || r.Data["partnerApps"] != nil || !strings.Contains(e.Message, "first") && !strings.Contains(e.Message, "last") {
					t.Fatalf("%s", r.Body)
				}
			})
		}
		t.Run("too complex", func(t *testing.T) {
			q := `{ partnerApps(first: 100) { edges { node { orders(first: 100) { edges { node { id orderNo amount } } } } } } }`
			e := a.gql(t, q, nil).fails(t, "QUERY_TOO_COMPLEX")
			if !strings.Contains(e.Message, "complex") {
				t.Fatal(e.Message)
			}
			// The same shape with small pages is fine.
			a.gql(t, `{ partnerApps(first: 10) { edges { node { orders(first: 10) { edges { node { id orderNo amount } } } } } } }`, nil).ok(t, "partnerApps")
		})
		t.Run("too deep", func(t *testing.T) {
			// order → app → orders → … nests without end; 13 levels is refused.
			q := `{ orders(first: 1) { edges { node { app { orders(first: 1) { edges { node { app { orders(first: 1) { edges { node { app { id } } } } } } } } } } } } }`
			e := a.gql(t, q, nil).fails(t, "QUERY_TOO_COMPLEX")
			if !strings.Contains(e.Message, "deep") {
				t.Fatal(e.Message)
			}
		})
		t.Run("fragments count", func(t *testing.T) {
			q := `{ partnerApps(first: 100) { ...A } } fragment A on PartnerAppConnection { edges { node { orders(first: 100) { edges { node { id orderNo } } } } } }`
			a.gql(t, q, nil).fails(t, "QUERY_TOO_COMPLEX")
		})
		t.Run("introspection", func(t *testing.T) {
			r := a.gql(t, graphiQLIntrospection, nil)
			if r.Status != 200 || len(r.Errors) > 0 || !strings.Contains(r.Body, `"PartnerAppSecretPayload"`) {
				t.Fatalf("HTTP %d: %.300s", r.Status, r.Body)
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
