package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Order is a partner's order, queried through the signed order API.
type Order struct {
	ent.Schema
}

// Fields of the Order.
func (Order) Fields() []ent.Field {
	return []ent.Field{
		field.String("order_no").MaxLen(64).NotEmpty().Unique().Immutable().
			Annotations(entgql.OrderField("ORDER_NO")),
		field.Int("app_id").Immutable(),
		// GraphQL's Int is 32-bit: amountMinor (Int64) and amountDecimal
		// carry the amount in the admin schema; amount and its where
		// filters stay as deprecated aliases (web-schema/int64.graphql,
		// ent/entc.go).
		field.Int64("amount").NonNegative().
			Comment("The amount in minor units (cents). In GraphQL a 32-bit Int kept for old clients; amountMinor and amountDecimal are its current forms.").
			Annotations(entgql.OrderField("AMOUNT"),
				entgql.Directives(entgql.Deprecated("GraphQL's Int is 32-bit and an amount can exceed it: use amountMinor (Int64, minor units) or amountDecimal (\"99.90\")."))),
		field.Enum("status").Values("CREATED", "PAID", "CANCELLED", "REFUNDED").Default("CREATED").
			Annotations(entgql.OrderField("STATUS")),
		field.String("customer_name").Optional().MaxLen(4 * 128), // characters are checked in internal/order
		field.String("customer_phone").Optional().MaxLen(4 * 32),
		field.String("customer_email").Optional().MaxLen(4 * 254),
		field.Time("create_time").Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
		field.Time("pay_time").Optional().Nillable(),
	}
}

// Edges of the Order.
func (Order) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("app", PartnerApp.Type).Ref("orders").Field("app_id").Unique().Required().Immutable(),
	}
}

// Indexes of the Order.
func (Order) Indexes() []ent.Index {
	return []ent.Index{index.Fields("app_id")}
}

// Annotations of the Order.
func (Order) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.QueryField(),
		entgql.RelayConnection(),
	}
}
