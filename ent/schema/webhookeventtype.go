package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
)

// WebhookEventType is a custom event type of the webhook catalogue, declared
// by an operator with createWebhookEventType for events the company's other
// services publish (publishWebhookEvent). The built-in types (the order
// events, webhook.test) are declared in code by the domain that raises
// them and are not stored. A type never changes once declared: receivers
// rely on its schema.
type WebhookEventType struct {
	ent.Schema
}

// Fields of the WebhookEventType.
func (WebhookEventType) Fields() []ent.Field {
	return []ent.Field{
		// name is the eventType of its messages (see webhook.CheckTypeName).
		field.String("name").MaxLen(64).NotEmpty().Unique().Immutable(),
		field.Text("description").Immutable(),
		// schema is the JSON Schema (draft 2020-12 unless it names another)
		// every bizData of the type must satisfy; example a bizData that does.
		field.Text("schema").Immutable(),
		field.Text("example").Optional().Immutable(),
		field.Time("create_time").Default(time.Now).Immutable(),
	}
}

// Annotations of the WebhookEventType: the admin schema shows the
// catalogue (built-in and custom types together) with a hand-written type.
func (WebhookEventType) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
