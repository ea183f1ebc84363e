//go:build ignore

// entc.go drives code generation for the Ent client and the GraphQL schema.
// Run it from the repository root (see ent/generate.go); paths are root-relative.
package main

import (
	"encoding/json"
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
		entgql.WithSchemaHook(dropNodeQueries, int64Filters, describe),
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

// describe carries what entgql leaves out into the GraphQL descriptions a
// schema browser shows: Query's, a type's (its schema.Comment), its id's,
// its connection edges' (their Comment), its enum types' (the field's
// Comment) and their values' (the ValueDocs annotation of ent/schema),
// and the values of its <Type>OrderField enum. entgql itself takes field
// and edge descriptions from their Comment, which stays out of the
// database (Postgres migrations) as long as no entsql.WithComments is set.
func describe(g *gen.Graph, s *ast.Schema) error {
	if q := s.Types["Query"]; q != nil {
		q.Description = "Reads, for every admin API key (ADMIN, READ_ONLY; PUBLISHER keys are refused). Lists are Relay connections, filtered by where and sorted by orderBy."
	}
	for _, n := range g.Nodes {
		def, ok := s.Types[n.Name]
		if !ok {
			continue
		}
		if def.Description == "" {
			var c struct{ Text string }
			if err := decode(n.Annotations["Comment"], &c); err != nil {
				return fmt.Errorf("describe %s: %w", n.Name, err)
			}
			def.Description = c.Text
		}
		if f := def.Fields.ForName("id"); f != nil && f.Description == "" {
			f.Description = "The " + n.Name + "'s id: an integer unique among " + n.Name + " objects only, written as a string of digits."
		}
		for _, e := range n.Edges {
			// A Relay connection's field is built without the edge's comment.
			if f := def.Fields.ForName(camel(e.Name)); f != nil && f.Description == "" {
				f.Description = e.Comment()
			}
		}
		order := s.Types[n.Name+"OrderField"]
		for _, f := range n.Fields {
			var values map[string]string
			if err := decode(f.Annotations["ValueDocs"], &values); err != nil {
				return fmt.Errorf("describe %s.%s: %w", n.Name, f.Name, err)
			}
			if f.IsEnum() && len(values) > 0 {
				enum := s.Types[n.Name+pascal(camel(f.Name))]
				if enum == nil {
					return fmt.Errorf("describe %s.%s: no enum type %s", n.Name, f.Name, n.Name+pascal(camel(f.Name)))
				}
				if c := f.Comment(); c != "" {
					enum.Description = c
				}
				for _, v := range enum.EnumValues {
					if values[v.Name] == "" {
						return fmt.Errorf("describe %s.%s: value %s has no ValueDocs entry", n.Name, f.Name, v.Name)
					}
					v.Description = values[v.Name]
				}
			}
			var ant entgql.Annotation
			if err := decode(f.Annotations[ant.Name()], &ant); err != nil {
				return fmt.Errorf("describe %s.%s: %w", n.Name, f.Name, err)
			}
			if order == nil || ant.OrderField == "" {
				continue
			}
			if v := order.EnumValues.ForName(ant.OrderField); v != nil {
				v.Description = "Sorts by " + camel(f.Name) + "; objects with equal values follow in id order."
			}
		}
	}
	return nil
}

// decode reads an annotation as entc stored it (its JSON form); a missing
// one leaves v as it is.
func decode(ant any, v any) error {
	if ant == nil {
		return nil
	}
	b, err := json.Marshal(ant)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// camel is the GraphQL spelling of an ent field name (create_time: createTime).
func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = pascal(parts[i])
	}
	return strings.Join(parts, "")
}
