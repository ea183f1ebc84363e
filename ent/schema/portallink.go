package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// PortalLink is a one-time link into the partner portal, minted by an
// admin (createPortalLink) for one partner app. Only a hash of its token
// is stored; it is redeemed at most once (used_at is set by an UPDATE
// that only matches an unused, unexpired row), on any replica.
type PortalLink struct {
	ent.Schema
}

// Fields of the PortalLink.
func (PortalLink) Fields() []ent.Field {
	return []ent.Field{
		field.String("token_hash").Unique().Immutable().Sensitive(),
		field.Int("app_id").Immutable(),
		// read_only: the session it becomes may look, not change.
		field.Bool("read_only").Default(false).Immutable(),
		field.Time("expires_at").Immutable(),
		field.Time("used_at").Optional().Nillable(),
		field.Time("create_time").Default(time.Now).Immutable(),
	}
}

// Indexes of the PortalLink.
func (PortalLink) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("expires_at"),
	}
}

// Annotations of the PortalLink.
func (PortalLink) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
