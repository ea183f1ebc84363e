//go:build ignore

// entc.go drives code generation for the Ent client and the GraphQL schema.
// Run it from the repository root (see ent/generate.go); paths are root-relative.
package main

import (
	"fmt"
	"log"
	"strings"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"github.com/vektah/gqlparser/v2/ast"
)

func main() {
	ex, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithWhereInputs(true),
		entgql.WithConfigPath("gqlgen.yml"),
		entgql.WithSchemaPath("web-schema/ent.graphql"),
		entgql.WithSchemaHook(dropNodeQueries, int64Filters),
	)
	if err != nil {
		log.Fatalf("creating entgql extension: %v", err)
	}
	err = entc.Generate("./ent/schema", &gen.Config{
		Target:  "ent",
		Package: "gatehouse/ent",
		Features: []gen.Feature{
			gen.FeatureUpsert,
			gen.FeatureLock,
			gen.FeatureModifier,
			gen.FeatureExecQuery,
			// Postgres schema changes are versioned migration files
			// (internal/store/migrations/postgres), written from the diff.
			gen.FeatureVersionedMigration,
		},
	}, entc.Extensions(ex), entc.TemplateFiles("ent/template/txkey.tmpl"))
	if err != nil {
		log.Fatalf("running ent codegen: %v", err)
	}
}

// dropNodeQueries removes the Relay `node`/`nodes` root fields. IDs are
// ordinary per-table integers (staff and partners see them), so an ID alone
// does not name its type; every type has its own typed connection query with
// a `where: {id: …}` filter instead.
func dropNodeQueries(_ *gen.Graph, s *ast.Schema) error {
	q, ok := s.Types["Query"]
	if !ok {
		return nil
	}
	kept := q.Fields[:0]
	for _, f := range q.Fields {
		if f.Name != "node" && f.Name != "nodes" {
			kept = append(kept, f)
		}
	}
	q.Fields = kept
	return nil
}

// int64Filters gives the where input of each field GraphQL shows as Int64
// (a 64-bit integer the 32-bit Int cannot carry) filters of that type
// under the field's current name, next to the old Int filters, which stay
// as deprecated aliases setting the same Go fields (Order.amount became
// amountMinor, APIKey.usageCount requestCount, APIUsage.count callCount).
func int64Filters(_ *gen.Graph, s *ast.Schema) error {
	for _, a := range []struct{ input, from, to, reason string }{
		{"OrderWhereInput", "amount", "amountMinor",
			"GraphQL's Int is 32-bit and an amount can exceed it: use the amountMinor filters (Int64)."},
		{"APIKeyWhereInput", "usageCount", "requestCount",
			"GraphQL's Int is 32-bit and a count can exceed it: use the requestCount filters (Int64)."},
		{"APIUsageWhereInput", "count", "callCount",
			"GraphQL's Int is 32-bit and a count can exceed it: use the callCount filters (Int64)."},
	} {
		in, ok := s.Types[a.input]
		if !ok {
			return fmt.Errorf("int64Filters: no input %s", a.input)
		}
		var added ast.FieldList
		for _, f := range in.Fields {
			op, ok := strings.CutPrefix(f.Name, a.from)
			if !ok || !filterOps[op] {
				continue
			}
			alias := *f.Type
			if alias.Elem != nil {
				elem := *alias.Elem
				elem.NamedType = "Int64"
				alias.Elem = &elem
			} else {
				alias.NamedType = "Int64"
			}
			added = append(added, &ast.FieldDefinition{
				Name: a.to + op,
				Type: &alias,
				Directives: ast.DirectiveList{{
					Name:      "goField",
					Arguments: ast.ArgumentList{{Name: "name", Value: &ast.Value{Kind: ast.StringValue, Raw: pascal(a.from) + op}}},
				}},
			})
			f.Directives = append(f.Directives, &ast.Directive{
				Name:      "deprecated",
				Arguments: ast.ArgumentList{{Name: "reason", Value: &ast.Value{Kind: ast.StringValue, Raw: a.reason}}},
			})
		}
		if len(added) == 0 {
			return fmt.Errorf("int64Filters: no %s filters in %s", a.from, a.input)
		}
		in.Fields = append(in.Fields, added...)
	}
	return nil
}

// filterOps are the suffixes of the where filters of an ordered field.
var filterOps = map[string]bool{"": true, "NEQ": true, "In": true, "NotIn": true, "GT": true, "GTE": true, "LT": true, "LTE": true}

func pascal(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
