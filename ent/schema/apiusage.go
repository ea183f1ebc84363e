package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// APIUsage counts signed partner calls per app, API version and UTC day.
type APIUsage struct {
	ent.Schema
}

// Fields of the APIUsage.
func (APIUsage) Fields() []ent.Field {
	return []ent.Field{
		field.Int("app_id").
			Comment("The id of the partner app whose signed calls are counted.").
			Immutable(),
		field.String("version").
			Comment("The partner API version called: v1 or v2.").
			MaxLen(8).Immutable().
			Annotations(entgql.OrderField("VERSION")),
		// day is the UTC day, formatted 2006-01-02.
		field.String("day").
			Comment("The UTC day counted, written 2006-01-02.").
			MaxLen(10).Immutable().
			Annotations(entgql.OrderField("DAY")),
		// GraphQL's Int is 32-bit: callCount (Int64) carries the count; count
		// and its filters stay as deprecated aliases (web-schema/int64.graphql,
		// ent/entc.go).
		field.Int64("count").
			Comment("Signed calls that day, as a 32-bit Int kept for old clients; callCount (Int64) is its current form.").
			Default(0).NonNegative().
			Annotations(entgql.OrderField("COUNT"),
				entgql.Directives(entgql.Deprecated("GraphQL's Int is 32-bit and a count can exceed it: use callCount (Int64)."))),
	}
}

// Edges of the APIUsage.
func (APIUsage) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("app", PartnerApp.Type).
			Comment("The partner app whose calls are counted.").
			Ref("usages").Field("app_id").Unique().Required().Immutable(),
	}
}

// Indexes of the APIUsage.
func (APIUsage) Indexes() []ent.Index {
	return []ent.Index{index.Fields("app_id", "version", "day").Unique()}
}

// Annotations of the APIUsage.
func (APIUsage) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("Signed partner calls counted per app, API version and UTC day."),
		entgql.QueryField().Description("Signed partner calls counted per app, API version and UTC day."),
		entgql.RelayConnection(),
	}
}
