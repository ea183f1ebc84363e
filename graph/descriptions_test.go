package graph_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/testenv"
)

// browserIntrospection reads what a schema browser shows: every type with
// its fields, their arguments, input fields and enum values (deprecated
// ones included), and the directives.
const browserIntrospection = `{ __schema {
  directives { name }
  types { name kind description
    fields(includeDeprecated: true) { name description args { name description } }
    inputFields { name description }
    enumValues(includeDeprecated: true) { name description } } } }`

// TestSchemaIsDescribed: at least 90 % of the types, fields, arguments,
// input fields and enum values a schema browser shows have a description
// (Ent's generated where-filters, *WhereInput, aside: their fields are
// one per operator and say what their names say). The introspection
// types and GraphQL's own scalars are the specification's, not ours.
func TestSchemaIsDescribed(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		res := a.GQL(t, browserIntrospection, nil)
		var s introspected
		if err := graphtest.Remarshal(res.OK(t, "__schema"), &s.Schema); err != nil {
			t.Fatal(err)
		}
		var total, with int
		var missing []string
		count := func(where, desc string) {
			total++
			if strings.TrimSpace(desc) != "" {
				with++
			} else {
				missing = append(missing, where)
			}
		}
		builtin := []string{"String", "Int", "Float", "Boolean", "ID"}
		for _, ty := range s.Schema.Types {
			if strings.HasPrefix(ty.Name, "__") || slices.Contains(builtin, ty.Name) || strings.HasSuffix(ty.Name, "WhereInput") {
				continue
			}
			count(ty.Name, ty.Description)
			for _, f := range ty.Fields {
				count(ty.Name+"."+f.Name, f.Description)
				for _, a := range f.Args {
					count(ty.Name+"."+f.Name+"("+a.Name+")", a.Description)
				}
			}
			for _, f := range ty.InputFields {
				count(ty.Name+"."+f.Name, f.Description)
			}
			for _, v := range ty.EnumValues {
				count(ty.Name+"."+v.Name, v.Description)
			}
		}
		share := float64(with) / float64(total)
		t.Logf("%d of %d described (%.1f %%)", with, total, 100*share)
		if share < 0.9 {
			out, _ := json.Marshal(missing)
			t.Errorf("only %d of %d (%.1f %%) described, want ≥ 90 %%; without a description: %s", with, total, 100*share, out)
		}
	})
}
