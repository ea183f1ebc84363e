package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
)

// IdempotencyRecord remembers a stock deduction by its business serial number.
type IdempotencyRecord struct {
	ent.Schema
}

// Fields of the IdempotencyRecord.
func (IdempotencyRecord) Fields() []ent.Field {
	return []ent.Field{
		field.String("biz_no").
			Comment("The partner's business serial number of the deduction, 1–64 printable ASCII characters, unique across apps.").
			MaxLen(64).NotEmpty().Unique().Immutable().
			Annotations(entgql.OrderField("BIZ_NO")),
		field.String("app_key").
			Comment("The app_key of the partner app that made the deduction.").
			MaxLen(64).NotEmpty().Immutable(),
		field.String("api_path").
			Comment("The API path called, such as /api/v1/inventory/deduct.").
			MaxLen(128).NotEmpty().Immutable(),
		field.Text("request_params").
			Comment("The deduction's parameters, compared with those of a repeat of the same bizNo (a difference is refused).").
			Default(""),
		field.Text("response_result").
			Comment("The data answered on success, replayed to a repeat; empty otherwise.").
			Optional(),
		// status: 0 processing, 1 success, 2 failure.
		field.Int("status").
			Comment("0: being processed; 1: succeeded (repeats replay the result); 2: failed (repeats are refused).").
			Default(0).Range(0, 2).
			Annotations(entgql.OrderField("STATUS")),
		field.Time("create_time").
			Comment("When the deduction was first received.").
			Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
		field.Time("update_time").
			Comment("When the record last changed.").
			Default(time.Now).UpdateDefault(time.Now),
	}
}

// Annotations of the IdempotencyRecord.
func (IdempotencyRecord) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("A stock deduction remembered by its business serial number (bizNo), so that a repeat replays its result instead of deducting again."),
		entgql.QueryField().Description("The stock deductions, by business serial number."),
		entgql.RelayConnection(),
	}
}
