//go:build ignore

// entc.go drives code generation for the Ent client and the GraphQL schema.
// Run it from the repository root (see ent/generate.go); paths are root-relative.
package main

import (
	"log"

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
		entgql.WithSchemaHook(dropNodeQueries),
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
	}, entc.Extensions(ex))
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
