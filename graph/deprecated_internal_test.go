package graph

import (
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"gatehouse/graph/playground"
)

// TestPlaygroundTabsUseCurrentNames: no Playground tab selects a field,
// passes an argument or fills an input field marked @deprecated, so the
// ready queries teach the current names (redirectURIs, amountMinor, …).
func TestPlaygroundTabsUseCurrentNames(t *testing.T) {
	schema := NewExecutableSchema(Config{Resolvers: &Resolver{}}).Schema()
	for _, query := range playground.TabQueries() {
		doc, err := gqlparser.LoadQueryWithRules(schema, query, nil)
		if err != nil {
			t.Fatalf("tab does not validate: %v\n%s", err, query)
		}
		for _, where := range deprecatedUses(doc) {
			t.Errorf("a Playground tab uses %s, which is deprecated", where)
		}
	}
}

// deprecatedUses names every deprecated field, argument and input field a
// validated document uses.
func deprecatedUses(doc *ast.QueryDocument) []string {
	var out []string
	deprecated := func(d ast.DirectiveList) bool { return d.ForName("deprecated") != nil }
	var value func(v *ast.Value)
	value = func(v *ast.Value) {
		if v == nil {
			return
		}
		for _, c := range v.Children {
			if v.Kind == ast.ObjectValue && v.Definition != nil {
				if f := v.Definition.Fields.ForName(c.Name); f != nil && deprecated(f.Directives) {
					out = append(out, v.Definition.Name+"."+c.Name)
				}
			}
			value(c.Value)
		}
	}
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if s.Definition != nil {
					if deprecated(s.Definition.Directives) {
						out = append(out, s.ObjectDefinition.Name+"."+s.Name)
					}
					for _, a := range s.Arguments {
						if d := s.Definition.Arguments.ForName(a.Name); d != nil && deprecated(d.Directives) {
							out = append(out, s.ObjectDefinition.Name+"."+s.Name+"("+a.Name+")")
						}
						value(a.Value)
					}
				}
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			case *ast.FragmentSpread:
				if s.Definition != nil {
					walk(s.Definition.SelectionSet)
				}
			}
		}
	}
	for _, op := range doc.Operations {
		walk(op.SelectionSet)
	}
	return out
}

// TestDeprecatedUsesSeesOldNames: the walk finds an old field, an old
// filter and an old argument spelled inside nested input objects.
func TestDeprecatedUsesSeesOldNames(t *testing.T) {
	schema := NewExecutableSchema(Config{Resolvers: &Resolver{}}).Schema()
	doc, err := gqlparser.LoadQueryWithRules(schema, `{ orders(first: 1, where: {and: [{amountGT: 1}]}) { edges { node { amount amountMinor app { redirectUris redirectURIs } } } } }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := deprecatedUses(doc)
	want := map[string]bool{"OrderWhereInput.amountGT": true, "Order.amount": true, "PartnerApp.redirectUris": true}
	if len(got) != len(want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	for _, g := range got {
		if !want[g] {
			t.Fatalf("found %v, want %v", got, want)
		}
	}
}
