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
		field.Int("delivery_id").
			Comment("The id of the webhook delivery this attempt belongs to.").
			Immutable(),
		field.Int("attempt_no").
			Comment("The attempt's number within its delivery, from 1, counted over resends too.").
			Immutable().
			Annotations(entgql.OrderField("ATTEMPT_NO")),
		field.Text("request_headers").
			Comment("The request's headers as a JSON object of name to value; signatures are redacted.").
			Immutable(),
		field.Text("request_body").
			Comment("The JSON body sent to the receiver.").
			Immutable(),
		field.Int("response_status").
			Comment("The receiver's HTTP status; null when no response came (connection error or timeout).").
			Optional().Nillable().Immutable(),
		field.Text("response_headers").
			Comment("The response's headers as a JSON object of name to value; empty when no response came.").
			Optional().Immutable(),
		field.Text("response_body").
			Comment("The start of the response body, at most 64 KiB.").
			Optional().Immutable(),
		field.Text("error").
			Comment("Why the attempt failed (a transport error or an unexpected status); empty on success.").
			Optional().Immutable(),
		field.Int64("duration_ms").
			Comment("How long the attempt took, in milliseconds.").
			Immutable(),
		field.Time("started_at").
			Comment("When the attempt started.").
			Default(time.Now).Immutable().
			Annotations(entgql.OrderField("STARTED_AT")),
	}
}

// Edges of the DeliveryAttempt.
func (DeliveryAttempt) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("delivery", WebhookDelivery.Type).
			Comment("The webhook delivery this attempt belongs to.").
			Ref("attempts").Field("delivery_id").Unique().Required().Immutable(),
	}
}

// Indexes of the DeliveryAttempt.
func (DeliveryAttempt) Indexes() []ent.Index {
	return []ent.Index{index.Fields("delivery_id", "attempt_no").Unique()}
}

// Annotations of the DeliveryAttempt.
func (DeliveryAttempt) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("One HTTP attempt of a webhook delivery, with what was sent and what came back."),
		entgql.RelayConnection(),
	}
}
