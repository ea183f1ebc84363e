package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// PartnerApp is a partner application: the caller of the signed API, the
// OAuth client and the receiver of webhooks.
type PartnerApp struct {
	ent.Schema
}

// Fields of the PartnerApp.
func (PartnerApp) Fields() []ent.Field {
	return []ent.Field{
		field.String("app_name").
			Comment("A display name, 1–128 characters.").
			MaxLen(4 * 128).NotEmpty(). // 128 characters (checked in internal/partner)
			Annotations(entgql.OrderField("APP_NAME")),
		field.String("app_key").
			Comment("The app's public key (the app_key query parameter and OAuth client_id), unique and fixed at creation.").
			MaxLen(64).NotEmpty().Unique().Immutable().
			Annotations(entgql.OrderField("APP_KEY")),
		// secret is the app secret sealed with the master key (AES-256-GCM).
		field.Bytes("secret").Sensitive(),
		field.Bytes("previous_secret").Optional().Nillable().Sensitive(),
		field.Time("previous_secret_expires_at").
			Comment("Until when the app's previous secret still verifies after a rotation; null when there is no overlap.").
			Optional().Nillable(),
		field.Int("status").
			Comment("1: enabled; 0: disabled: its signed calls are refused (4001), and so are its OAuth requests.").
			Default(1).Range(0, 1).
			Annotations(entgql.OrderField("STATUS")),
		field.Int("rate_limit").
			Comment("Signed calls allowed per sliding second, 1–1,000,000; calls over it get HTTP 429.").
			Default(1000).Range(1, 1_000_000),
		field.Time("expire_date").
			Comment("The last UTC day on which the app's signed calls are accepted (valid through its end); null: no expiry.").
			Optional().Nillable(),
		// callback_url and the webhook secrets speak for the app's first
		// webhook endpoint (deprecated; internal/webhook keeps them equal
		// to it). An app without endpoints keeps its webhook secret for
		// the first one it gets through callbackURL.
		field.String("callback_url").
			Comment("The URL of the app's first webhook endpoint; null when it has none.").
			Optional().MaxLen(2048).
			Annotations(entgql.Directives(entgql.Deprecated("the URL of the app's first webhook endpoint: use webhookEndpoints"))),
		// webhook_secret is the webhook signing secret sealed with the master key.
		field.Bytes("webhook_secret").Optional().Nillable().Sensitive(),
		field.Bytes("previous_webhook_secret").Optional().Nillable().Sensitive(),
		field.Time("previous_webhook_secret_expires_at").
			Comment("Until when the first webhook endpoint's previous signing secret still signs; null when there is no overlap.").
			Optional().Nillable().
			Annotations(entgql.Directives(entgql.Deprecated("the app's first webhook endpoint's: use webhookEndpoints { previousSecretExpiresAt }"))),
		// redirectURIs in GraphQL (URL, URIs and ID in capitals everywhere);
		// the old spelling redirectUris stays as a deprecated alias
		// (web-schema/aliases.graphql).
		field.Strings("redirect_uris").
			Comment("The OAuth redirect URIs the app registered; an authorization request must name one of them exactly.").
			Optional().
			Annotations(entgql.MapsTo("redirectURIs")),
		field.Strings("scopes").
			Comment("The OAuth scopes the app may request.").
			Optional(),
		field.Time("create_time").
			Comment("When the app was created.").
			Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
		field.Time("update_time").
			Comment("When the app was last changed.").
			Default(time.Now).UpdateDefault(time.Now),
	}
}

// Edges of the PartnerApp.
func (PartnerApp) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("orders", Order.Type).
			Comment("The app's orders.").
			Annotations(entgql.RelayConnection()),
		edge.To("webhook_deliveries", WebhookDelivery.Type).
			Comment("The webhook deliveries queued for the app, over all its endpoints.").
			Annotations(entgql.RelayConnection()),
		edge.To("webhook_endpoints", WebhookEndpoint.Type).
			Comment("The app's webhook endpoints (0 to 10)."),
		edge.To("usages", APIUsage.Type).
			Comment("The app's signed calls counted per API version and UTC day.").
			Annotations(entgql.RelayConnection()),
		edge.To("auth_codes", AuthCode.Type).Annotations(entgql.Skip(entgql.SkipAll)),
		edge.To("oauth_tokens", OAuthToken.Type).Annotations(entgql.Skip(entgql.SkipAll)),
	}
}

// Annotations of the PartnerApp.
func (PartnerApp) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("A partner application: the caller of the signed API (appKey and secret), the OAuth client and the receiver of webhooks."),
		entgql.QueryField().Description("The partner apps."),
		entgql.RelayConnection(),
	}
}
