package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// User is a person who signs in (JWT login, OAuth approval).
type User struct {
	ent.Schema
}

// Fields of the User.
func (User) Fields() []ent.Field {
	return []ent.Field{
		field.String("username").
			Comment("The name the user signs in with, unique, at most 64 characters.").
			MaxLen(64).NotEmpty().Unique().
			Annotations(entgql.OrderField("USERNAME")),
		field.String("password_hash").Sensitive(),
		field.Strings("roles").
			Comment("The user's roles, carried in their tokens.").
			Optional(),
		field.Int("status").
			Comment("1: may sign in; 0: disabled, sign-ins and the user's existing tokens are refused.").
			Default(1).Range(0, 1),
		// tokens_revoked_at: the user's signed tokens, OAuth tokens and
		// browser sessions from before this instant are refused (set when
		// the user is disabled or given a new password).
		field.Time("tokens_revoked_at").
			Comment("The user's tokens and sessions from before this instant are refused (set by disableUser and setUserPassword); null if never.").
			Optional().Nillable(),
		// security_version counts the changes that end the user's
		// sign-ins (a disable, a new password): each adds one, in the
		// transaction of the change. A login reads it with the user,
		// before the password check, and every token it issues carries
		// it (the JWT's sv claim, the OAuth code and token rows, the
		// browser session); a token carrying an older version is refused,
		// however late its login finished.
		field.Int("security_version").Default(0).NonNegative().
			Annotations(entgql.Skip(entgql.SkipAll)),
		field.Time("create_time").
			Comment("When the user was created.").
			Default(time.Now).Immutable().
			Annotations(entgql.OrderField("CREATE_TIME")),
	}
}

// Edges of the User.
func (User) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("auth_codes", AuthCode.Type).Annotations(entgql.Skip(entgql.SkipAll)),
		edge.To("oauth_tokens", OAuthToken.Type).Annotations(entgql.Skip(entgql.SkipAll)),
	}
}

// Annotations of the User.
func (User) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("A person who signs in (JWT login, OAuth approval). The password is stored as a hash only and never shown."),
		entgql.QueryField().Description("The users who sign in."),
		entgql.RelayConnection(),
	}
}
