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

// WebhookEndpoint is one receiver of an app's webhooks: a URL with its
// own signing secret, event filter and circuit breaker. An app has 0 to
// 10 of them (checked in internal/webhook); its first one (lowest id) is
// the one the deprecated PartnerApp.callbackURL and webhook secret speak
// for.
type WebhookEndpoint struct {
	ent.Schema
}

// Fields of the WebhookEndpoint.
func (WebhookEndpoint) Fields() []ent.Field {
	return []ent.Field{
		field.Int("app_id").
			Comment("The id of the partner app that owns the endpoint.").
			Immutable(),
		field.String("url").
			Comment("Where deliveries are POSTed: an absolute http or https URL, at most 2048 characters.").
			MaxLen(2048).NotEmpty(),
		field.String("description").
			Comment("A staff note about the endpoint, up to 256 characters.").
			MaxLen(4 * 256).Default(""),
		// event_types is the filter: the event types the endpoint
		// receives; empty receives every type. Stored as null when never
		// set, but GraphQL always reads a list ([] then, graph's resolver),
		// so the field is declared non-null there.
		field.Strings("event_types").
			Comment("The event types the endpoint receives; []: every type.").
			Optional().
			Annotations(entgql.Type("[String!]!")),
		// A disabled endpoint receives no new event (fan-out skips it); the
		// deliveries it already had are held and go out once it is enabled
		// again.
		field.Bool("enabled").
			Comment("false: disabled by hand (no new events) or automatically (see autoDisabledAt); its waiting deliveries are held until it is enabled again.").
			Default(true),
		// auto_disabled_at is set when gatehouse disabled the endpoint
		// because every delivery failed for 5 days; such an endpoint keeps
		// receiving events, held, until an operator enables it (then they
		// go out). Enabling clears it.
		field.Time("auto_disabled_at").
			Comment("When gatehouse disabled the endpoint because every delivery failed for 5 days; null otherwise. enableWebhookEndpoint clears it.").
			Optional().Nillable(),
		// secret is the signing secret ("whsec_…") sealed with the master
		// key; the previous one keeps signing until its expiry (rotation
		// overlap).
		field.Bytes("secret").Sensitive().Annotations(entgql.Skip()),
		field.Bytes("previous_secret").Optional().Nillable().Sensitive().Annotations(entgql.Skip()),
		field.Time("previous_secret_expires_at").
			Comment("Until when the previous signing secret keeps signing next to the new one after a rotation; null when there is no overlap.").
			Optional().Nillable(),
		// rate_limit caps the deliveries per second to this endpoint
		// (per replica); nil: no cap beyond the app's in-flight share.
		field.Int("rate_limit").
			Comment("At most this many deliveries per second to the endpoint, per replica (1–10,000); null: no cap beyond the app's share.").
			Optional().Nillable().Range(1, 10_000),
		// retry_schedule is the waits, in seconds, before each retry of a
		// failed delivery (at most 19 retries spanning at most 30 days,
		// checked in internal/webhook); null: the default schedule.
		field.Ints("retry_schedule").Optional().
			Comment("Seconds to wait before each retry of a failed delivery: [5, 300] is a first attempt, a retry 5 s after it, another 5 min later, then FAILED. Null: the default schedule (1, 2, 4, 8, 16 s × GATEHOUSE_WEBHOOK_RETRY_BASE)."),
		// headers are the custom request headers (a JSON object of name →
		// value) sealed with the master key: their values often carry the
		// receiver's credentials, so they are never shown back.
		field.Bytes("headers").Optional().Nillable().Sensitive().Annotations(entgql.Skip()),
		// client_certificate (PEM, public) and client_key (PEM, sealed with
		// the master key) are presented to the receiver when it asks for a
		// client certificate (mutual TLS).
		field.Text("client_certificate").Optional().Nillable().
			Annotations(entgql.Skip(entgql.SkipWhereInput)).
			Comment("The PEM certificate (chain) presented to the receiver for mutual TLS; null: none. Its private key is never shown."),
		field.Bytes("client_key").Optional().Nillable().Sensitive().Annotations(entgql.Skip()),
		field.Time("create_time").
			Comment("When the endpoint was created.").
			Default(time.Now).Immutable(),
		field.Time("update_time").
			Comment("When the endpoint was last changed.").
			Default(time.Now).UpdateDefault(time.Now),
	}
}

// Edges of the WebhookEndpoint.
func (WebhookEndpoint) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("app", PartnerApp.Type).
			Comment("The partner app that owns the endpoint.").
			Ref("webhook_endpoints").Field("app_id").Unique().Required().Immutable(),
		edge.To("deliveries", WebhookDelivery.Type).Annotations(entgql.Skip(entgql.SkipAll)),
	}
}

// Indexes of the WebhookEndpoint.
func (WebhookEndpoint) Indexes() []ent.Index {
	return []ent.Index{index.Fields("app_id", "enabled")}
}

// Annotations of the WebhookEndpoint.
func (WebhookEndpoint) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("A receiver of an app's webhooks: a URL with its own signing secret, event filter, rate limit and circuit breaker. An app has 0 to 10."),
		entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput),
	}
}
