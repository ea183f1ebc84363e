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
		field.String("name").
			Comment("A staff-chosen label telling keys apart, 1–128 characters.").
			MaxLen(4 * 128).NotEmpty(). // 128 characters (checked in internal/apikey)
			Annotations(entgql.OrderField("NAME")),
		// prefix is the first characters of the key, shown to tell keys apart.
		field.String("prefix").
			Comment("The first characters of the key (the whole key is shown once, at creation, and only its hash is stored).").
			MaxLen(16).Immutable(),
		field.String("key_hash").Unique().Immutable().Sensitive(),
		field.Int("status").
			Comment("1: the key is accepted; 0: disabled, every request with it is refused (disableAPIKey, enableAPIKey).").
			Default(1).Range(0, 1),
		// role: ADMIN keys may query and change; READ_ONLY keys may only
		// query (every mutation is refused with FORBIDDEN); PUBLISHER keys
		// may only publish events (POST /api/events, publishWebhookEvent).
		// Keys made before roles existed are ADMIN.
		field.Enum("role").
			Comment("What the key may do: ADMIN query and change, READ_ONLY query only, PUBLISHER publish events only.").
			Values("ADMIN", "READ_ONLY", "PUBLISHER").Default("ADMIN").
			Annotations(ValueDocs{
				"ADMIN":     "May query and call every mutation.",
				"READ_ONLY": "May query; every mutation is refused with FORBIDDEN.",
				"PUBLISHER": "May only publish events (POST /api/events, publishWebhookEvent), within its scopes.",
			},
				entgql.OrderField("ROLE")),
		// scopes limit what a PUBLISHER key may publish: event type names
		// ("order.paid") or prefixes ending in ".*" ("order.*"); empty: every
		// publishable type. Fixed when the key is created.
		field.Strings("scopes").
			Comment("For a PUBLISHER key, the event types it may publish: names (order.paid) or prefixes ending in .* (order.*); empty: every publishable type. Fixed at creation.").
			Optional().Immutable(),
		// GraphQL's Int is 32-bit: requestCount (Int64) carries the count;
		// usageCount and its filters stay as deprecated aliases
		// (web-schema/int64.graphql, ent/entc.go).
		field.Int64("usage_count").
			Comment("Requests made with the key, as a 32-bit Int kept for old clients; requestCount (Int64) is its current form.").
			Default(0).NonNegative().
			Annotations(entgql.OrderField("USAGE_COUNT"),
				entgql.Directives(entgql.Deprecated("GraphQL's Int is 32-bit and a count can exceed it: use requestCount (Int64)."))),
		field.Time("last_used_at").
			Comment("When a request last used the key; null if never.").
			Optional().Nillable(),
		field.Time("create_time").
			Comment("When the key was created.").
			Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
	}
}

// Annotations of the APIKey.
func (APIKey) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("A key for the admin GraphQL API (Authorization: Bearer). Only a hash of the key is stored."),
		entgql.QueryField().Description("The admin API keys, without the keys themselves."),
		entgql.RelayConnection(),
	}
}
