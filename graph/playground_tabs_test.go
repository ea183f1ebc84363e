package graph_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// TestPlaygroundTabsRun: every operation of every tab the Playground
// opens with, as served in the page, runs against the schema: queries
// with an ADMIN key without any error (limits included), mutations with a
// READ_ONLY key up to the role rule (FORBIDDEN: the document validated,
// nothing changed). A schema change that breaks a tab fails here.
func TestPlaygroundTabsRun(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		page := a.Do(t, "GET", a.AdminURL+"/", "")
		if page.Status != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("page: %d %s", page.Status, page.Header.Get("Content-Type"))
		}
		m := regexp.MustCompile(`(?m)const tabs = (\[.*\]);$`).FindSubmatch(page.Body)
		if m == nil {
			t.Fatal("no tabs in the page")
		}
		var tabs []struct {
			Query     string `json:"query"`
			Variables string `json:"variables"`
		}
		if err := json.Unmarshal(m[1], &tabs); err != nil || len(tabs) < 6 {
			t.Fatalf("tabs: %d, %v", len(tabs), err)
		}
		ro := graphtest.Str(a.GQL(t, `mutation { createAPIKey(name: "tabs", role: READ_ONLY) { key } }`, nil).OK(t, "createAPIKey"), "key")
		ran := 0
		for _, tab := range tabs {
			doc, err := parser.ParseQuery(&ast.Source{Input: tab.Query})
			if err != nil {
				t.Fatalf("tab does not parse: %v\n%s", err, tab.Query)
			}
			var vars map[string]any
			if tab.Variables != "" {
				if err := json.Unmarshal([]byte(tab.Variables), &vars); err != nil {
					t.Fatalf("variables %q: %v", tab.Variables, err)
				}
			}
			for _, op := range doc.Operations {
				body, _ := json.Marshal(map[string]any{"query": tab.Query, "variables": vars, "operationName": op.Name})
				key := a.Key
				if op.Operation == ast.Mutation {
					key = ro
				}
				r := a.Do(t, "POST", a.AdminURL+"/graphql", string(body), "Content-Type", "application/json", "X-API-Key", key)
				var out struct {
					Errors []graphtest.Error `json:"errors"`
				}
				if err := json.Unmarshal(r.Body, &out); err != nil {
					t.Fatalf("%s: %d %s", op.Name, r.Status, r.Body)
				}
				switch {
				case op.Operation == ast.Mutation && (len(out.Errors) != 1 || out.Errors[0].Code() != "FORBIDDEN"):
					t.Errorf("mutation %s with a READ_ONLY key: %s", op.Name, r.Body)
				case op.Operation == ast.Query && len(out.Errors) > 0:
					t.Errorf("query %s: %s", op.Name, r.Body)
				}
				ran++
			}
		}
		if ran < 14 {
			t.Fatalf("ran %d operations", ran)
		}
	})
}

// TestPlaygroundTabsAreHarmless: with live rows in the database (an app,
// a delivered webhook, ids 1), every mutation of every tab, run as served
// with an ADMIN key (one click), changes nothing: its ids are
// placeholders (NOT_FOUND) or its input is left for the operator to fill
// in (VALIDATION_FAILED). Only creating a read-only key is a one-click
// mutation, and it changes nothing that exists.
func TestPlaygroundTabsAreHarmless(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b, func(c *config.Config) { c.Webhooks.AllowPrivate = true })
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		t.Cleanup(sink.Close)
		p := a.GQL(t, createAppMutation, map[string]any{"in": map[string]any{"appName": "Live", "callbackURL": sink.URL + "/h"}}).OK(t, "createPartnerApp")
		appID := graphtest.Str(p, "app", "id")
		a.GQL(t, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "LIVE-1", amount: "2.00"}) { id } }`, map[string]any{"app": appID}).OK(t, "createOrder")
		a.GQL(t, `mutation { payOrder(orderNo: "LIVE-1") { id } }`, nil).OK(t, "payOrder")
		const state = `{ webhookDeliveries(first: 100) { edges { node { id status retryCount } } } partnerApps(first: 100) { edges { node { id previousSecretExpiresAt previousWebhookSecretExpiresAt webhookEndpoints { id previousSecretExpiresAt } } } } webhookEventTypes { name } }`
		graphtest.Eventually(t, 10*time.Second, "the live delivery is delivered", func() bool {
			r := a.GQL(t, `{ webhookDeliveries(where: {status: SUCCESS}) { totalCount } }`, nil).OK(t, "webhookDeliveries")
			return graphtest.Num(r, "totalCount") == 1
		})
		before := a.GQL(t, state, nil).Body

		page := a.Do(t, "GET", a.AdminURL+"/", "")
		m := regexp.MustCompile(`(?m)const tabs = (\[.*\]);$`).FindSubmatch(page.Body)
		var tabs []struct {
			Query     string `json:"query"`
			Variables string `json:"variables"`
		}
		if m == nil || json.Unmarshal(m[1], &tabs) != nil {
			t.Fatal("no tabs in the page")
		}
		mutations := 0
		for _, tab := range tabs {
			doc, err := parser.ParseQuery(&ast.Source{Input: tab.Query})
			if err != nil {
				t.Fatal(err)
			}
			var vars map[string]any
			if tab.Variables != "" {
				if err := json.Unmarshal([]byte(tab.Variables), &vars); err != nil {
					t.Fatal(err)
				}
			}
			for _, op := range doc.Operations {
				if op.Operation != ast.Mutation || op.Name == "CreateReadOnlyKey" {
					continue
				}
				mutations++
				body, _ := json.Marshal(map[string]any{"query": tab.Query, "variables": vars, "operationName": op.Name})
				r := a.Do(t, "POST", a.AdminURL+"/graphql", string(body), "Content-Type", "application/json", "X-API-Key", a.Key)
				var out struct {
					Errors []graphtest.Error `json:"errors"`
				}
				_ = json.Unmarshal(r.Body, &out)
				if len(out.Errors) != 1 || (out.Errors[0].Code() != "NOT_FOUND" && out.Errors[0].Code() != "VALIDATION_FAILED") {
					t.Errorf("mutation %s, one click with an ADMIN key: %s", op.Name, r.Body)
				}
			}
		}
		if mutations < 9 {
			t.Fatalf("%d mutations in the tabs", mutations)
		}
		if after := a.GQL(t, state, nil).Body; after != before {
			t.Errorf("the tabs changed something:\nbefore %s\nafter  %s", before, after)
		}
	})
}
