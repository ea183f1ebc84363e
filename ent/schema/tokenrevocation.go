package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// TokenRevocation is the durable record of a signed user token (JWT)
// refused before its expiry: one logged-out token (kind "jti", subject =
// its jti), or every token of a user issued at or before revoked_at (kind
// "user", subject = the user id; a disable or a new password — and every
// token carrying a security version below version). Every
// replica keeps these rows in memory and checks tokens there; the row is
// what survives a restart or the loss of Redis. Rows are only inserted
// (replicas follow them by id) and deleted once expires_at passed: no
// token they concern can still be valid then.
type TokenRevocation struct {
	ent.Schema
}

// Fields of the TokenRevocation.
func (TokenRevocation) Fields() []ent.Field {
	return []ent.Field{
		field.Enum("kind").Values("jti", "user").Immutable(),
		field.String("subject").MaxLen(128).NotEmpty().Immutable(),
		// revoked_at: for kind "user", tokens issued at or before this
		// instant (millisecond resolution) are refused.
		field.Time("revoked_at").Immutable(),
		// version: for kind "user", the user's security version after the
		// change; tokens carrying a lower one are refused whenever they
		// were issued. 0 in rows of earlier releases.
		field.Int("version").Default(0).NonNegative().Immutable(),
		// expires_at: when the last token this row can concern expires.
		field.Time("expires_at").Immutable(),
	}
}

// Indexes of the TokenRevocation.
func (TokenRevocation) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("expires_at"),
	}
}

// Annotations of the TokenRevocation.
func (TokenRevocation) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
