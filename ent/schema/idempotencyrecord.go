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
		field.String("biz_no").MaxLen(64).NotEmpty().Unique().Immutable().
			Annotations(entgql.OrderField("BIZ_NO")),
		field.String("app_key").MaxLen(64).NotEmpty().Immutable(),
		field.String("api_path").MaxLen(128).NotEmpty().Immutable(),
		field.Text("request_params").Default(""),
		field.Text("response_result").Optional(),
		// status: 0 processing, 1 success, 2 failure.
		field.Int("status").Default(0).Range(0, 2).
			Annotations(entgql.OrderField("STATUS")),
		field.Time("create_time").Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
		field.Time("update_time").Default(time.Now).UpdateDefault(time.Now),
	}
}

// Annotations of the IdempotencyRecord.
func (IdempotencyRecord) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.QueryField(),
		entgql.RelayConnection(),
	}
}
