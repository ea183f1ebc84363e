package e2e_test

import (
	"context"
	"regexp"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// moneyName matches the property names that hold money.
var moneyName = regexp.MustCompile(`(?i)(amount|price|total|balance|fee)`)

// TestOpenAPIForGenerators: what code generators read from
// docs/openapi.yaml. Every operation has an operationId, unique in the
// file (generators name methods after it; without one they invent names
// from paths), and every money field is of a form a generated client keeps
// exact: an integer of minor units, a string with a decimal pattern, or a
// number marked format decimal with a Go type that keeps its digits
// (x-go-type), never a plain number, which oapi-codegen makes a float32.
func TestOpenAPIForGenerators(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	n, money := 0, 0
	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, path := range paths {
		for method, op := range doc.Paths.Value(path).Operations() {
			n++
			where := method + " " + path
			switch prev, dup := seen[op.OperationID]; {
			case op.OperationID == "":
				t.Errorf("%s has no operationId", where)
			case dup:
				t.Errorf("%s and %s share the operationId %q", prev, where, op.OperationID)
			default:
				seen[op.OperationID] = where
			}
			w := &moneyWalk{t: t, seen: map[*openapi3.Schema]bool{}, checked: &money}
			for _, p := range op.Parameters {
				if p.Value != nil && p.Value.Schema != nil {
					w.check(where+" parameter "+p.Value.Name, p.Value.Name, p.Value.Schema.Value)
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for ct, mt := range op.RequestBody.Value.Content {
					if mt.Schema != nil {
						w.check(where+" request "+ct, "", mt.Schema.Value)
					}
				}
			}
			for status, r := range op.Responses.Map() {
				if r.Value == nil {
					continue
				}
				for ct, mt := range r.Value.Content {
					if mt.Schema != nil {
						w.check(where+" "+status+" "+ct, "", mt.Schema.Value)
					}
				}
			}
		}
	}
	if n < 26 {
		t.Fatalf("found %d operations", n)
	}
	if len(seen) != n {
		t.Errorf("%d operations, %d operationIds", n, len(seen))
	}
	if money == 0 {
		t.Error("no money field found: the name pattern no longer matches the spec")
	}
}

// moneyWalk visits a schema and everything under it once.
type moneyWalk struct {
	t       *testing.T
	seen    map[*openapi3.Schema]bool
	checked *int // money fields checked
}

func (w *moneyWalk) check(where, name string, s *openapi3.Schema) {
	if s == nil || w.seen[s] {
		return
	}
	w.seen[s] = true
	if name != "" && moneyName.MatchString(name) && (s.Type.Is("number") || s.Type.Is("integer") || s.Type.Is("string")) {
		*w.checked++
		switch {
		case s.Type.Is("integer"):
		case s.Type.Is("string"):
			if s.Pattern == "" {
				w.t.Errorf("%s: money field %s is a string without a decimal pattern", where, name)
			}
		default:
			if s.Format != "decimal" || s.Extensions["x-go-type"] == nil {
				w.t.Errorf("%s: money field %s is a number of format %q without x-go-type: generated clients read it as a float", where, name, s.Format)
			}
		}
	}
	if s.Type.Is("number") && (s.Format == "float" || s.Format == "double") && moneyName.MatchString(name) {
		w.t.Errorf("%s: %s is a binary float", where, name)
	}
	for pn, p := range s.Properties {
		w.check(where+"."+pn, pn, p.Value)
	}
	if s.Items != nil {
		w.check(where+"[]", name, s.Items.Value)
	}
	for _, group := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, x := range group {
			w.check(where, name, x.Value)
		}
	}
}
