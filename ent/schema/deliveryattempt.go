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

// DeliveryAttempt records one HTTP attempt of a webhook delivery.
type DeliveryAttempt struct {
	ent.Schema
}

// Fields of the DeliveryAttempt.
func (DeliveryAttempt) Fields() []ent.Field {
	return []ent.Field{
		field.Int("delivery_id").Immutable(),
		field.Int("attempt_no").Immutable().
			Annotations(entgql.OrderField("ATTEMPT_NO")),
		field.Text("request_headers").Immutable(),
		field.Text("request_body").Immutable(),
		field.Int("response_status").Optional().Nillable().Immutable(),
		field.Text("response_headers").Optional().Immutable(),
		field.Text("response_body").Optional().Immutable(),
		field.Text("error").Optional().Immutable(),
		field.Int64("duration_ms").Immutable(),
		field.Time("started_at").Default(time.Now).Immutable().
			Annotations(entgql.OrderField("STARTED_AT")),
	}
}

// Edges of the DeliveryAttempt.
func (DeliveryAttempt) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("delivery", WebhookDelivery.Type).Ref("attempts").Field("delivery_id").Unique().Required().Immutable(),
	}
}

// Indexes of the DeliveryAttempt.
func (DeliveryAttempt) Indexes() []ent.Index {
	return []ent.Index{index.Fields("delivery_id", "attempt_no").Unique()}
}

// Annotations of the DeliveryAttempt.
func (DeliveryAttempt) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
	}
}
