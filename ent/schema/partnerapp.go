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
		field.String("app_name").MaxLen(4 * 128).NotEmpty(). // 128 characters (checked in internal/partner)
									Annotations(entgql.OrderField("APP_NAME")),
		field.String("app_key").MaxLen(64).NotEmpty().Unique().Immutable().
			Annotations(entgql.OrderField("APP_KEY")),
		// secret is the app secret sealed with the master key (AES-256-GCM).
		field.Bytes("secret").Sensitive(),
		field.Bytes("previous_secret").Optional().Nillable().Sensitive(),
		field.Time("previous_secret_expires_at").Optional().Nillable(),
		field.Int("status").Default(1).Range(0, 1).
			Annotations(entgql.OrderField("STATUS")),
		field.Int("rate_limit").Default(1000).Range(1, 1_000_000),
		field.Time("expire_date").Optional().Nillable(),
		// callback_url and the webhook secrets speak for the app's first
		// webhook endpoint (deprecated; internal/webhook keeps them equal
		// to it). An app without endpoints keeps its webhook secret for
		// the first one it gets through callbackURL.
		field.String("callback_url").Optional().MaxLen(2048).
			Annotations(entgql.Directives(entgql.Deprecated("the URL of the app's first webhook endpoint: use webhookEndpoints"))),
		// webhook_secret is the webhook signing secret sealed with the master key.
		field.Bytes("webhook_secret").Optional().Nillable().Sensitive(),
		field.Bytes("previous_webhook_secret").Optional().Nillable().Sensitive(),
		field.Time("previous_webhook_secret_expires_at").Optional().Nillable().
			Annotations(entgql.Directives(entgql.Deprecated("the app's first webhook endpoint's: use webhookEndpoints { previousSecretExpiresAt }"))),
		// redirectURIs in GraphQL (URL, URIs and ID in capitals everywhere);
		// the old spelling redirectUris stays as a deprecated alias
		// (web-schema/aliases.graphql).
		field.Strings("redirect_uris").Optional().
			Annotations(entgql.MapsTo("redirectURIs")),
		field.Strings("scopes").Optional(),
		field.Time("create_time").Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
		field.Time("update_time").Default(time.Now).UpdateDefault(time.Now),
	}
}

// Edges of the PartnerApp.
func (PartnerApp) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("orders", Order.Type).Annotations(entgql.RelayConnection()),
		edge.To("webhook_deliveries", WebhookDelivery.Type).Annotations(entgql.RelayConnection()),
		edge.To("webhook_endpoints", WebhookEndpoint.Type),
		edge.To("usages", APIUsage.Type).Annotations(entgql.RelayConnection()),
		edge.To("auth_codes", AuthCode.Type).Annotations(entgql.Skip(entgql.SkipAll)),
		edge.To("oauth_tokens", OAuthToken.Type).Annotations(entgql.Skip(entgql.SkipAll)),
	}
}

// Annotations of the PartnerApp.
func (PartnerApp) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.QueryField(),
		entgql.RelayConnection(),
	}
}
