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
		field.String("order_no").
			Comment("The order number partners query by, 1–64 characters, unique.").
			MaxLen(64).NotEmpty().Unique().Immutable().
			Annotations(entgql.OrderField("ORDER_NO")),
		field.Int("app_id").
			Comment("The id of the partner app that owns the order; only it may query the order.").
			Immutable(),
		// GraphQL's Int is 32-bit: amountMinor (Int64) and amountDecimal
		// carry the amount in the admin schema; amount and its where
		// filters stay as deprecated aliases (web-schema/int64.graphql,
		// ent/entc.go).
		field.Int64("amount").NonNegative().
			Comment("The amount in minor units (cents). In GraphQL a 32-bit Int kept for old clients; amountMinor and amountDecimal are its current forms.").
			Annotations(entgql.OrderField("AMOUNT"),
				entgql.Directives(entgql.Deprecated("GraphQL's Int is 32-bit and an amount can exceed it: use amountMinor (Int64, minor units) or amountDecimal (\"99.90\")."))),
		field.Enum("status").
			Comment("Where the order is in its life: CREATED, then PAID or CANCELLED; a PAID order may become REFUNDED.").
			Values("CREATED", "PAID", "CANCELLED", "REFUNDED").Default("CREATED").
			Annotations(ValueDocs{
				"CREATED":   "Created and not yet paid.",
				"PAID":      "Paid (payTime is set).",
				"CANCELLED": "Cancelled before payment; final.",
				"REFUNDED":  "Paid, then refunded; final.",
			},
				entgql.OrderField("STATUS")),
		field.String("customer_name").
			Comment("The customer's name, up to 128 characters; partners see it in v2 answers.").
			Optional().MaxLen(4 * 128), // characters are checked in internal/order
		field.String("customer_phone").
			Comment("The customer's phone number; partners see it masked (138****0000).").
			Optional().MaxLen(4 * 32),
		field.String("customer_email").
			Comment("The customer's email address; partners see it masked (a***@example.com).").
			Optional().MaxLen(4 * 254),
		field.Time("create_time").
			Comment("When the order was created.").
			Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
		field.Time("pay_time").
			Comment("When the order was paid; null until then.").
			Optional().Nillable(),
	}
}

// Edges of the Order.
func (Order) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("app", PartnerApp.Type).
			Comment("The partner app that owns the order.").
			Ref("orders").Field("app_id").Unique().Required().Immutable(),
	}
}

// Indexes of the Order.
func (Order) Indexes() []ent.Index {
	return []ent.Index{index.Fields("app_id")}
}

// Annotations of the Order.
func (Order) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("A partner's order, which the partner queries through the signed order API."),
		entgql.QueryField().Description("The orders of every partner app."),
		entgql.RelayConnection(),
	}
}
