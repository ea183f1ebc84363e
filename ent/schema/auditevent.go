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
		field.Time("time").Default(time.Now).Immutable().
			Annotations(entgql.OrderField("TIME")),
		// The API key that called, and its name at that time. An id of
		// another object, so GraphQL types it ID (no edge: the event
		// outlives nothing and must not hold the key row back).
		field.Int("api_key_id").Immutable().
			Annotations(entgql.Type("ID")),
		field.String("api_key_name").MaxLen(4 * 128).Immutable(),
		// mutation is the GraphQL field name (createPartnerApp, …).
		field.String("mutation").MaxLen(128).NotEmpty().Immutable().
			Annotations(entgql.OrderField("MUTATION")),
		// target_type is the GraphQL type acted on (PartnerApp, Order, …)
		// and target_id its id (or order number); null when unknown (a
		// create that failed).
		field.String("target_type").MaxLen(64).Optional().Nillable().Immutable(),
		field.String("target_id").MaxLen(128).Optional().Nillable().Immutable(),
		field.Enum("outcome").Values("SUCCESS", "REFUSED", "FAILED").Immutable().
			Annotations(entgql.OrderField("OUTCOME")),
		// error_code is the extensions.code the caller was given
		// (FORBIDDEN, VALIDATION_FAILED, …); null on success.
		field.String("error_code").MaxLen(64).Optional().Nillable().Immutable(),
		// request_id ties the event to the request log line.
		field.String("request_id").MaxLen(64).Optional().Nillable().Immutable(),
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
		entgql.QueryField(),
		entgql.RelayConnection(),
	}
}
