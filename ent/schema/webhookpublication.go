package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// WebhookPublication remembers a message published with an idempotency key
// (publishWebhookEvent), so that the same key within 24 h returns that
// message and sends nothing new. It is written in the transaction that
// queues the message; the unique (app, key) index makes concurrent
// publishes of one key produce one message. The webhook retention job
// removes rows past their 24 h.
type WebhookPublication struct {
	ent.Schema
}

// Fields of the WebhookPublication.
func (WebhookPublication) Fields() []ent.Field {
	return []ent.Field{
		// app_id is the partner app the message went to (no edge: the row
		// is a short-lived key, not part of the app's data).
		field.Int("app_id").Immutable(),
		field.String("idempotency_key").MaxLen(128).NotEmpty().Immutable(),
		// event_id is the message's id (its deliveries' webhook-id).
		field.String("event_id").MaxLen(64).NotEmpty().Immutable(),
		field.String("event_type").MaxLen(64).NotEmpty().Immutable(),
		field.Text("biz_data").Immutable(),
		field.Time("create_time").Default(time.Now).Immutable(),
	}
}

// Indexes of the WebhookPublication.
func (WebhookPublication) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("app_id", "idempotency_key").Unique(),
		index.Fields("create_time"),
	}
}

// Annotations of the WebhookPublication: not shown in the admin schema
// (publishWebhookEvent returns the message itself).
func (WebhookPublication) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
