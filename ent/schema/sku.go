package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
)

// Sku is a stock-keeping unit whose stock partners deduct.
type Sku struct {
	ent.Schema
}

// Fields of the Sku.
func (Sku) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").
			Comment("The SKU's name, 1–200 characters.").
			MaxLen(4 * 200).NotEmpty(). // 200 characters (checked in internal/inventory)
			Annotations(entgql.OrderField("NAME")),
		// stock never goes negative: deductions are conditional updates.
		field.Int64("stock").
			Comment("Units in stock; deductions never take it below 0.").
			NonNegative().
			Annotations(entgql.OrderField("STOCK")),
		field.Time("update_time").
			Comment("When the SKU (or its stock) last changed.").
			Default(time.Now).UpdateDefault(time.Now).
			Annotations(entgql.OrderField("UPDATE_TIME")),
	}
}

// Annotations of the Sku.
func (Sku) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("A stock-keeping unit whose stock partners deduct through the signed API."),
		entgql.QueryField().Description("The SKUs and their stock."),
		entgql.RelayConnection(),
	}
}
