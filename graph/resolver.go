// Package graph holds the admin GraphQL resolvers. Each resolver is a few
// lines over an internal/ service or the Ent client; gqlgen generates the
// executor (generated.go) from web-schema/*.graphql.
package graph

import (
	"gatehouse/ent"
)

// Resolver is the root resolver; its fields are the services the admin
// schema reaches.
type Resolver struct {
	Client *ent.Client
}
