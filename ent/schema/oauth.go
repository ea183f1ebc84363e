package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// AuthCode is an OAuth authorization code. Only its hash is stored.
type AuthCode struct {
	ent.Schema
}

// Fields of the AuthCode.
func (AuthCode) Fields() []ent.Field {
	return []ent.Field{
		field.String("code_hash").Unique().Immutable().Sensitive(),
		field.Int("app_id").Immutable(),
		field.Int("user_id").Immutable(),
		field.String("scope").Default("").Immutable(),
		field.String("redirect_uri").MaxLen(2048).Immutable(),
		field.String("code_challenge").Optional().Immutable(),
		field.String("code_challenge_method").Optional().Immutable(),
		field.Time("expires_at").Immutable(),
		field.Time("used_at").Optional().Nillable(),
		// user_version: the user's security version when they signed in
		// for this code; it must still be theirs when it is exchanged.
		field.Int("user_version").Default(0).NonNegative().Immutable(),
		field.Time("create_time").Default(time.Now).Immutable(),
	}
}

// Edges of the AuthCode.
func (AuthCode) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("app", PartnerApp.Type).Ref("auth_codes").Field("app_id").Unique().Required().Immutable(),
		edge.From("user", User.Type).Ref("auth_codes").Field("user_id").Unique().Required().Immutable(),
	}
}

// Annotations of the AuthCode.
func (AuthCode) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// OAuthToken is an access/refresh token pair issued to an OAuth client.
// Only hashes of the tokens are stored.
type OAuthToken struct {
	ent.Schema
}

// Fields of the OAuthToken.
func (OAuthToken) Fields() []ent.Field {
	return []ent.Field{
		field.String("access_hash").Unique().Immutable().Sensitive(),
		field.String("refresh_hash").Unique().Immutable().Sensitive(),
		field.Int("app_id").Immutable(),
		field.Int("user_id").Immutable(),
		// auth_code_id links tokens to the code they came from, so that a
		// replayed code revokes them.
		field.Int("auth_code_id").Optional().Nillable().Immutable(),
		field.String("scope").Default("").Immutable(),
		field.Time("access_expires_at").Immutable(),
		field.Time("refresh_expires_at").Immutable(),
		field.Time("revoked_at").Optional().Nillable(),
		// user_version: the user's security version at the sign-in the
		// pair descends from (a refresh keeps it); a pair whose user has
		// a newer one is refused.
		field.Int("user_version").Default(0).NonNegative().Immutable(),
		field.Time("create_time").Default(time.Now).Immutable(),
	}
}

// Edges of the OAuthToken.
func (OAuthToken) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("app", PartnerApp.Type).Ref("oauth_tokens").Field("app_id").Unique().Required().Immutable(),
		edge.From("user", User.Type).Ref("oauth_tokens").Field("user_id").Unique().Required().Immutable(),
	}
}

// Annotations of the OAuthToken.
func (OAuthToken) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
