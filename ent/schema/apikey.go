package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
)

// APIKey guards the admin GraphQL endpoint. Only a hash of the key is stored.
type APIKey struct {
	ent.Schema
}

// Fields of the APIKey.
func (APIKey) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").MaxLen(4 * 128).NotEmpty(). // 128 characters (checked in internal/apikey)
									Annotations(entgql.OrderField("NAME")),
		// prefix is the first characters of the key, shown to tell keys apart.
		field.String("prefix").MaxLen(16).Immutable(),
		field.String("key_hash").Unique().Immutable().Sensitive(),
		field.Int("status").Default(1).Range(0, 1),
		// role: ADMIN keys may query and change; READ_ONLY keys may only
		// query (every mutation is refused with FORBIDDEN); PUBLISHER keys
		// may only publish events (POST /api/events, publishWebhookEvent).
		// Keys made before roles existed are ADMIN.
		field.Enum("role").Values("ADMIN", "READ_ONLY", "PUBLISHER").Default("ADMIN").
			Annotations(entgql.OrderField("ROLE")),
		// scopes limit what a PUBLISHER key may publish: event type names
		// ("order.paid") or prefixes ending in ".*" ("order.*"); empty: every
		// publishable type. Fixed when the key is created.
		field.Strings("scopes").Optional().Immutable(),
		// GraphQL's Int is 32-bit: requestCount (Int64) carries the count;
		// usageCount and its filters stay as deprecated aliases
		// (web-schema/int64.graphql, ent/entc.go).
		field.Int64("usage_count").Default(0).NonNegative().
			Annotations(entgql.OrderField("USAGE_COUNT"),
				entgql.Directives(entgql.Deprecated("GraphQL's Int is 32-bit and a count can exceed it: use requestCount (Int64)."))),
		field.Time("last_used_at").Optional().Nillable(),
		field.Time("create_time").Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
	}
}

// Annotations of the APIKey.
func (APIKey) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.QueryField(),
		entgql.RelayConnection(),
	}
}
