package graph

import (
	"github.com/vektah/gqlparser/v2/ast"
)

// servedSchema is schema as clients see it: without the directives that
// only instruct the code generators (@goField, @goModel) or the server
// itself (@auditTarget, read by mutationGate), which introspection would
// otherwise list as if a query could use them. GraphQL's own directives
// (@skip, @include, @deprecated, @specifiedBy, …) stay. The fields and
// arguments keep their directives: mutationGate reads @auditTarget there.
func servedSchema(schema *ast.Schema) *ast.Schema {
	out := *schema
	out.Directives = make(map[string]*ast.DirectiveDefinition, len(schema.Directives))
	for name, d := range schema.Directives {
		if builtIn(d) {
			out.Directives[name] = d
		}
	}
	return &out
}

// builtIn reports whether d is one of GraphQL's own directives (the
// parser's prelude), not one the schema files declare.
func builtIn(d *ast.DirectiveDefinition) bool {
	return d.Position != nil && d.Position.Src != nil && d.Position.Src.BuiltIn
}
