package graph_test

import (
	"slices"
	"testing"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/testenv"
)

type described struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

type introspected struct {
	Schema struct {
		Directives []described `json:"directives"`
		Types      []struct {
			described
			Kind   string `json:"kind"`
			Fields []struct {
				described
				Args []described `json:"args"`
			} `json:"fields"`
			InputFields []described `json:"inputFields"`
			EnumValues  []described `json:"enumValues"`
		} `json:"types"`
	} `json:"__schema"`
}

// TestInternalDirectivesHidden: introspection lists GraphQL's own
// directives only, not those that instruct the code generators (@goField,
// @goModel) or the server (@auditTarget), which no query can use.
func TestInternalDirectivesHidden(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		var s introspected
		if err := graphtest.Remarshal(a.GQL(t, `{ __schema { directives { name } } }`, nil).OK(t, "__schema"), &s.Schema); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range s.Schema.Directives {
			names = append(names, d.Name)
			if !slices.Contains([]string{"skip", "include", "deprecated", "specifiedBy", "oneOf", "defer"}, d.Name) {
				t.Errorf("introspection lists the internal directive @%s", d.Name)
			}
		}
		for _, want := range []string{"skip", "include", "deprecated"} {
			if !slices.Contains(names, want) {
				t.Errorf("introspection lacks @%s: %v", want, names)
			}
		}
	})
}
