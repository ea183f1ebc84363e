package graph_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"gatehouse/ent/auditevent"
	"gatehouse/graph/graphtest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

const queriesIntrospection = `{ __schema { queryType { fields { name args { name type { ...T } } type { ...T } } } } }
fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }`

// TestPublisherKeyRefusedEverythingButPublish: a PUBLISHER key, created
// with createAPIKey(role: PUBLISHER, scopes), may publish an event of a
// type its scopes allow with publishWebhookEvent, and nothing else: every
// other mutation and every query of the schema (read by introspection
// with an ADMIN key, so that fields added later are covered) is refused
// with FORBIDDEN, introspection included, and nothing changes. A type
// outside its scopes is refused too. A successful publish writes no audit
// row (the message log records it); refusals are audited.
func TestPublisherKeyRefusedEverythingButPublish(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		t.Cleanup(sink.Close)
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Pub", "callbackURL": sink.URL + "/h"}}).OK(t, "createPartnerApp")
		appID := graphtest.Str(p, "app", "id")
		for _, name := range []string{"invoice.issued", "shipment.sent"} {
			a.GQL(t, `mutation($n: String!) { createWebhookEventType(name: $n, description: "d", schema: {type: "object"}) { name } }`,
				map[string]any{"n": name}).OK(t, "createWebhookEventType")
		}
		// Scopes are checked when the key is made.
		a.GQL(t, `mutation { createAPIKey(name: "bad", role: PUBLISHER, scopes: ["order paid"]) { key } }`, nil).Fails(t, "VALIDATION_FAILED")
		a.GQL(t, `mutation { createAPIKey(name: "bad", role: ADMIN, scopes: ["order.*"]) { key } }`, nil).Fails(t, "VALIDATION_FAILED")
		k := a.GQL(t, `mutation { createAPIKey(name: "billing", role: PUBLISHER, scopes: ["invoice.*"]) { key apiKey { id role scopes } } }`, nil).OK(t, "createAPIKey")
		if graphtest.Str(k, "apiKey", "role") != "PUBLISHER" || graphtest.Str(k, "apiKey", "scopes", 0) != "invoice.*" {
			t.Fatalf("createAPIKey: %v", k)
		}
		pub := graphtest.Str(k, "key")
		pubID := graphtest.IntID(t, k, "apiKey", "id")

		// It publishes in its scopes.
		const publish = `mutation($app: ID!, $t: String!) { publishWebhookEvent(appID: $app, eventType: $t, bizData: {n: 1}, idempotencyKey: "k1") { eventID deliveries { id } } }`
		m := graphtest.GQLAs(t, a.Env, pub, publish, map[string]any{"app": appID, "t": "invoice.issued"}).OK(t, "publishWebhookEvent")
		if !strings.HasPrefix(graphtest.Str(m, "eventID"), "msg_") || graphtest.Str(m, "deliveries", 0, "id") == "" {
			t.Fatalf("publish: %v", m)
		}
		graphtest.GQLAs(t, a.Env, pub, publish, map[string]any{"app": appID, "t": "shipment.sent"}).Fails(t, "FORBIDDEN")

		// Everything else is refused.
		ms := introspectMutations(t, a, a.Key)
		var qs struct {
			Schema struct {
				QueryType struct {
					Fields []mfield `json:"fields"`
				} `json:"queryType"`
			} `json:"__schema"`
		}
		res := a.GQL(t, queriesIntrospection, nil)
		decodeInto(t, res.Data, &qs)
		s := seeded{orderNo: "none", ids: map[string]string{"PartnerApp": appID}}
		before := snapshot(t, a.App.DB)
		refused := 0
		for _, f := range ms.Mutations {
			if f.Name == "publishWebhookEvent" {
				continue
			}
			doc := ms.call(f, s)
			if r := graphtest.GQLAs(t, a.Env, pub, doc, nil); len(r.Errors) != 1 || r.Errors[0].Code() != "FORBIDDEN" || r.Data[f.Name] != nil {
				t.Errorf("mutation %s with a PUBLISHER key: HTTP %d %s", f.Name, r.Status, r.Body)
			}
			refused++
		}
		queries := append(qs.Schema.QueryType.Fields, mfield{Name: "__schema"}, mfield{Name: "__type", Args: nil})
		for _, f := range queries {
			doc := "query" + strings.TrimPrefix(ms.call(f, s), "mutation")
			switch f.Name {
			case "__schema":
				doc = `{ __schema { queryType { name } } }`
			case "__type":
				doc = `{ __type(name: "Query") { name } }`
			}
			if r := graphtest.GQLAs(t, a.Env, pub, doc, nil); len(r.Errors) != 1 || r.Errors[0].Code() != "FORBIDDEN" {
				t.Errorf("query %s with a PUBLISHER key: HTTP %d %s\n%s", f.Name, r.Status, r.Body, doc)
			}
		}
		if len(ms.Mutations) < 30 || len(qs.Schema.QueryType.Fields) < 10 || !slices.ContainsFunc(qs.Schema.QueryType.Fields, func(f mfield) bool { return f.Name == "auditEvents" }) {
			t.Fatalf("introspection found %d mutations and %d queries", len(ms.Mutations), len(qs.Schema.QueryType.Fields))
		}
		after := snapshot(t, a.App.DB)
		for table, rows := range before {
			if !slices.Equal(rows, after[table]) {
				t.Errorf("table %s changed under a PUBLISHER key:\nbefore %v\nafter  %v", table, rows, after[table])
			}
		}

		// The audit log: the refusals, not the successful publish.
		events, err := a.App.DB.AuditEvent.Query().Where(auditevent.APIKeyID(pubID)).All(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.Mutation == "publishWebhookEvent" && e.Outcome == auditevent.OutcomeSUCCESS {
				t.Errorf("a successful publish was audited: %+v", e)
			}
		}
		if len(events) != refused+1 { // + the publish outside the scopes
			t.Errorf("%d audit events for %d refused mutations and one refused publish", len(events), refused)
		}
	})
}
