package guard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/auditevent"
	"gatehouse/graph/graphtest"
	"gatehouse/internal/apikey"
	"gatehouse/internal/testenv"
)

// refusedEvent is what the test compares of an audit event.
type refusedEvent struct {
	Mutation, TargetType, TargetID, Outcome, Code, KeyName string
}

// eventsAfter returns the audit events with an id above after, waiting
// (with a deadline) until there are at least want of them.
func eventsAfter(t *testing.T, a *graphtest.Admin, after, want int) []refusedEvent {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows, err := a.App.DB.AuditEvent.Query().Where(auditevent.IDGT(after)).Order(ent.Asc(auditevent.FieldID)).All(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) >= want || time.Now().After(deadline) {
			out := make([]refusedEvent, len(rows))
			for i, r := range rows {
				out[i] = refusedEvent{Mutation: r.Mutation, Outcome: string(r.Outcome), KeyName: r.APIKeyName}
				if r.TargetType != nil {
					out[i].TargetType = *r.TargetType
				}
				if r.TargetID != nil {
					out[i].TargetID = *r.TargetID
				}
				if r.ErrorCode != nil {
					out[i].Code = *r.ErrorCode
				}
			}
			return out
		}
		time.Sleep(10 * time.Millisecond) // polling the table, with a deadline
	}
}

func lastEventID(t *testing.T, a *graphtest.Admin) int {
	t.Helper()
	ids, err := a.App.DB.AuditEvent.Query().Order(ent.Desc(auditevent.FieldID)).Limit(1).IDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		return 0
	}
	return ids[0]
}

// A document holding a mutation that is refused before it runs is
// audited: one REFUSED event per mutation field that can be named (else
// one named "?"), with the code the caller saw, through the real admin
// HTTP handler.
func TestRefusedMutationsAreAudited(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		post := func(body string) (int, string) {
			r := a.Do(t, "POST", a.AdminURL+"/graphql", body, "Content-Type", "application/json", "X-API-Key", a.Key)
			return r.Status, string(r.Body)
		}
		doc := func(query string) string {
			b, _ := json.Marshal(map[string]any{"query": query})
			return string(b)
		}
		many := func(n int, field string) string {
			var q strings.Builder
			q.WriteString("mutation {")
			for i := range n {
				fmt.Fprintf(&q, " m%d: %s", i, field)
			}
			q.WriteString(" }")
			return q.String()
		}
		skuCountBefore := a.App.DB.Sku.Query().CountX(context.Background())
		pad := strings.Repeat(" ", 70<<10)
		cases := []struct {
			name   string
			body   string
			status int
			want   []refusedEvent
		}{
			{"validation: a required argument missing",
				doc(`mutation { createSku(input: {name: "no stock"}) { id } }`), 422,
				[]refusedEvent{{Mutation: "createSku", TargetType: "Sku", Code: "GRAPHQL_VALIDATION_FAILED"}}},
			{"validation: an argument of the wrong type, the target kept",
				doc(`mutation { disableAPIKey(id: "7") { id } setSkuStock(id: "3", stock: "many") { id } }`), 422,
				[]refusedEvent{
					{Mutation: "disableAPIKey", TargetType: "APIKey", TargetID: "7", Code: "GRAPHQL_VALIDATION_FAILED"},
					{Mutation: "setSkuStock", TargetType: "Sku", TargetID: "3", Code: "GRAPHQL_VALIDATION_FAILED"}}},
			{"unknown field",
				doc(`mutation { launchRockets(id: 9) { id } }`), 422,
				// Not in the schema: no target is read from its arguments.
				[]refusedEvent{{Mutation: "launchRockets", Code: "GRAPHQL_VALIDATION_FAILED"}}},
			{"variables and fragments",
				`{"query":"mutation M($o: String!) { ... on Mutation { payOrder(orderNo: $o) { id } } ...F } fragment F on Mutation { cancelOrder(orderNo: \"SO-2\") { nope } }","variables":{"o":"SO-1"}}`, 422,
				[]refusedEvent{
					{Mutation: "payOrder", TargetType: "Order", TargetID: "SO-1", Code: "GRAPHQL_VALIDATION_FAILED"},
					{Mutation: "cancelOrder", TargetType: "Order", TargetID: "SO-2", Code: "GRAPHQL_VALIDATION_FAILED"}}},
			{"a NUL in an argument",
				doc(`mutation { createSku(input: {name: "a\u0000b", stock: 1}) { id } }`), 200,
				[]refusedEvent{{Mutation: "createSku", TargetType: "Sku", Code: "VALIDATION_FAILED"}}},
			{"syntax error: nothing can be named",
				doc(`mutation { createSku(input: {name: "x", stock: 1} { id } }`), 422,
				[]refusedEvent{{Mutation: "?", Code: "GRAPHQL_PARSE_FAILED"}}},
			{"size: too many same-named fields",
				doc(`mutation { createSku(input: {name: "x", stock: 1}) { id` + strings.Repeat(" __typename", 400) + ` } }`), 422,
				[]refusedEvent{{Mutation: "createSku", TargetType: "Sku", Code: "QUERY_TOO_COMPLEX"}}},
			{"size: too many tokens",
				doc(`mutation { createSku(input: {name: "x", stock: 1}) { ...F } } fragment F on Sku {` + strings.Repeat(" id", 21_000) + ` }`), 422,
				[]refusedEvent{{Mutation: "createSku", TargetType: "Sku", Code: "GRAPHQL_PARSE_FAILED"}}},
			{"size: body over 64 KiB",
				doc(`mutation { createSku(input: {name: "x", stock: 1}) { id } }` + pad), 413,
				[]refusedEvent{{Mutation: "?", Code: "PAYLOAD_TOO_LARGE"}}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := lastEventID(t, a)
				status, body := post(c.body)
				if status != c.status {
					t.Fatalf("HTTP %d, want %d: %.300s", status, c.status, body)
				}
				got := eventsAfter(t, a, before, len(c.want))
				for i := range c.want {
					c.want[i].Outcome, c.want[i].KeyName = "REFUSED", "test"
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("events\n got %v\nwant %v\n(reply %.300s)", got, c.want, body)
				}
			})
		}

		t.Run("price: 51 mutations, one event each", func(t *testing.T) {
			before := lastEventID(t, a)
			status, body := post(doc(many(51, `createSku(input: {name: "bulk", stock: 1}) { id }`)))
			if !strings.Contains(body, "QUERY_TOO_COMPLEX") {
				t.Fatalf("HTTP %d %.300s", status, body)
			}
			got := eventsAfter(t, a, before, 51)
			if len(got) != 51 {
				t.Fatalf("%d events, want 51", len(got))
			}
			for _, e := range got {
				if e != (refusedEvent{Mutation: "createSku", TargetType: "Sku", Outcome: "REFUSED", Code: "QUERY_TOO_COMPLEX", KeyName: "test"}) {
					t.Fatalf("event %v", e)
				}
			}
		})

		t.Run("thousands of fields: bounded events", func(t *testing.T) {
			before := lastEventID(t, a)
			var q strings.Builder
			q.WriteString("mutation {")
			for range 3000 {
				q.WriteString(" a:payOrder{id}")
			}
			q.WriteString(" }")
			status, body := post(doc(q.String()))
			if status != 422 || !strings.Contains(body, "QUERY_TOO_COMPLEX") {
				t.Fatalf("HTTP %d %.300s", status, body)
			}
			if got := eventsAfter(t, a, before, 100); len(got) != 100 {
				t.Fatalf("%d events, want 100", len(got))
			}
		})

		t.Run("GET: 405, Allow POST, METHOD_NOT_ALLOWED", func(t *testing.T) {
			before := lastEventID(t, a)
			q := url.Values{"query": {`mutation { createSku(input: {name: "by GET", stock: 1}) { id } }`}}
			r := a.Do(t, "GET", a.AdminURL+"/graphql?"+q.Encode(), "", "X-API-Key", a.Key)
			var out struct {
				Data   any
				Errors []graphtest.Error
			}
			_ = json.Unmarshal(r.Body, &out)
			if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "POST" || out.Data != nil ||
				len(out.Errors) != 1 || out.Errors[0].Code() != "METHOD_NOT_ALLOWED" {
				t.Fatalf("HTTP %d Allow %q: %s", r.Status, r.Header.Get("Allow"), r.Body)
			}
			want := []refusedEvent{{Mutation: "createSku", TargetType: "Sku", Outcome: "REFUSED", Code: "METHOD_NOT_ALLOWED", KeyName: "test"}}
			if got := eventsAfter(t, a, before, 1); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			// A query still runs over GET, and audits nothing.
			before = lastEventID(t, a)
			q = url.Values{"query": {`{ skus(first: 1) { totalCount } }`}}
			if r := a.Do(t, "GET", a.AdminURL+"/graphql?"+q.Encode(), "", "X-API-Key", a.Key); r.Status != 200 {
				t.Fatalf("query over GET: %d %s", r.Status, r.Body)
			}
			// The mutation in a document whose selected operation is a
			// query is not what runs.
			q = url.Values{"query": {`query Q { skus(first: 1) { totalCount } } mutation M { createSku(input: {name: "x", stock: 1}) { id } }`}, "operationName": {"Q"}}
			if r := a.Do(t, "GET", a.AdminURL+"/graphql?"+q.Encode(), "", "X-API-Key", a.Key); r.Status != 200 {
				t.Fatalf("query Q over GET: %d %s", r.Status, r.Body)
			}
			if got := eventsAfter(t, a, before, 0); len(got) != 0 {
				t.Fatalf("queries audited: %v", got)
			}
		})

		t.Run("role: a READ_ONLY key", func(t *testing.T) {
			_, roKey, err := a.App.APIKeys.Create(context.Background(), "reader", apikey.RoleReadOnly)
			if err != nil {
				t.Fatal(err)
			}
			before := lastEventID(t, a)
			r := graphtest.GQLAs(t, a.Env, roKey, `mutation { a: createSku(input: {name: "x", stock: 1}) { id } b: disableAPIKey(id: "1") { id } }`, nil)
			if len(r.Errors) != 2 || r.Errors[0].Code() != "FORBIDDEN" {
				t.Fatalf("HTTP %d %s", r.Status, r.Body)
			}
			want := []refusedEvent{
				{Mutation: "createSku", TargetType: "Sku", Outcome: "REFUSED", Code: "FORBIDDEN", KeyName: "reader"},
				{Mutation: "disableAPIKey", TargetType: "APIKey", TargetID: "1", Outcome: "REFUSED", Code: "FORBIDDEN", KeyName: "reader"},
			}
			if got := eventsAfter(t, a, before, 2); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("events\n got %v\nwant %v", got, want)
			}
		})

		t.Run("a mutation that runs is audited once", func(t *testing.T) {
			before := lastEventID(t, a)
			a.GQL(t, `mutation { createSku(input: {name: "ran", stock: 1}) { id } }`, nil).OK(t, "createSku")
			if got := eventsAfter(t, a, before, 1); len(got) != 1 || got[0].Outcome != "SUCCESS" {
				t.Fatalf("events %v", got)
			}
			// A refused query audits nothing.
			before = lastEventID(t, a)
			if status, body := post(doc(`{ noSuchField }`)); status != 422 {
				t.Fatalf("HTTP %d %s", status, body)
			}
			if got := eventsAfter(t, a, before, 0); len(got) != 0 {
				t.Fatalf("a refused query was audited: %v", got)
			}
		})

		if n := a.App.DB.Sku.Query().CountX(context.Background()); n != skuCountBefore+1 {
			t.Fatalf("SKUs %d → %d: a refused mutation ran", skuCountBefore, n)
		}
	})
}
