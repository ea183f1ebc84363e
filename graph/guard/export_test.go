package guard

import (
	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// AuditTarget is the target the mutation gate records for field of
// schema (mutationGate.target), for the tests of package guard_test,
// which hold the admin schema.
func AuditTarget(schema *ast.Schema, field graphql.CollectedField, vars map[string]any, result any) (typ, id string) {
	return mutationGate{schema: schema}.target(field, vars, result)
}
