package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// AuditEvent records one admin mutation, successful or refused: who (the
// API key), what (the mutation and its target), when, and how it ended.
// It holds ids and codes only, never an argument value that could be a
// secret. Rows are appended and never changed; only the retention job
// deletes them (internal/audit).
type AuditEvent struct {
	ent.Schema
}

// Fields of the AuditEvent.
func (AuditEvent) Fields() []ent.Field {
	return []ent.Field{
		field.Time("time").
			Comment("When the mutation was answered.").
			Default(time.Now).Immutable().
			Annotations(entgql.OrderField("TIME")),
		// The API key that called, and its name at that time. An id of
		// another object, so GraphQL types it ID (no edge: the event
		// outlives nothing and must not hold the key row back).
		field.Int("api_key_id").
			Comment("The id of the API key that called.").
			Immutable().
			Annotations(entgql.Type("ID")),
		field.String("api_key_name").
			Comment("The calling key's name at the time of the call (a later rename does not change it).").
			MaxLen(4 * 128).Immutable(),
		// mutation is the GraphQL field name (createPartnerApp, …).
		field.String("mutation").
			Comment("The GraphQL mutation called, such as createPartnerApp.").
			MaxLen(128).NotEmpty().Immutable().
			Annotations(entgql.OrderField("MUTATION")),
		// target_type is the GraphQL type acted on (PartnerApp, Order, …)
		// and target_id its id (or order number); null when unknown (a
		// create that failed).
		field.String("target_type").
			Comment("The GraphQL type acted on (PartnerApp, Order, …); null when unknown, as for a create that failed.").
			MaxLen(64).Optional().Nillable().Immutable(),
		field.String("target_id").
			Comment("The id (or order number) of the object acted on; null when unknown.").
			MaxLen(128).Optional().Nillable().Immutable(),
		field.Enum("outcome").
			Comment("How the call ended: SUCCESS, REFUSED (the caller's error) or FAILED (the server's).").
			Values("SUCCESS", "REFUSED", "FAILED").Immutable().
			Annotations(ValueDocs{
				"SUCCESS": "The mutation did what it was asked.",
				"REFUSED": "The caller was told no (FORBIDDEN, VALIDATION_FAILED, NOT_FOUND, CONFLICT, INVALID_STATE, …).",
				"FAILED":  "The service could not do it (INTERNAL, UNAVAILABLE).",
			},
				entgql.OrderField("OUTCOME")),
		// error_code is the extensions.code the caller was given
		// (FORBIDDEN, VALIDATION_FAILED, …); null on success.
		field.String("error_code").
			Comment("The extensions.code the caller was given (FORBIDDEN, VALIDATION_FAILED, …); null on success.").
			MaxLen(64).Optional().Nillable().Immutable(),
		// request_id ties the event to the request log line.
		field.String("request_id").
			Comment("The request's id (X-Request-Id, the caller's or one made for it), which ties the event to the request log line.").
			MaxLen(64).Optional().Nillable().Immutable(),
	}
}

// Indexes of the AuditEvent.
func (AuditEvent) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("time"),
		index.Fields("api_key_id", "time"),
	}
}

// Annotations of the AuditEvent.
func (AuditEvent) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("One admin mutation, successful or refused: who called (the API key), what (the mutation and its target), when, and how it ended. Holds ids and codes only, never an argument value; kept for the retention period, then deleted."),
		entgql.QueryField().Description("The audit log of admin mutations."),
		entgql.RelayConnection(),
	}
}
