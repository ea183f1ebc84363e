package graph_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"gatehouse/internal/testenv"
)

// TestPlaygroundTabsRun: every operation of every tab the Playground
// opens with, as served in the page, runs against the schema: queries
// with an ADMIN key without any error (limits included), mutations with a
// READ_ONLY key up to the role rule (FORBIDDEN: the document validated,
// nothing changed). A schema change that breaks a tab fails here.
func TestPlaygroundTabsRun(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
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
		ro := str(a.gql(t, `mutation { createAPIKey(name: "tabs", role: READ_ONLY) { key } }`, nil).ok(t, "createAPIKey"), "key")
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
					Errors []gqlError `json:"errors"`
				}
				if err := json.Unmarshal(r.Body, &out); err != nil {
					t.Fatalf("%s: %d %s", op.Name, r.Status, r.Body)
				}
				switch {
				case op.Operation == ast.Mutation && (len(out.Errors) != 1 || out.Errors[0].code() != "FORBIDDEN"):
					t.Errorf("mutation %s with a READ_ONLY key: %s", op.Name, r.Body)
				case op.Operation == ast.Query && len(out.Errors) > 0:
					t.Errorf("query %s: %s", op.Name, r.Body)
				}
				ran++
			}
		}
		if ran < 11 {
			t.Fatalf("ran %d operations", ran)
		}
	})
}
