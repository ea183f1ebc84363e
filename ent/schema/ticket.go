package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Ticket is an internal support ticket recorded by staff.
type Ticket struct {
	ent.Schema
}

// Fields of the Ticket.
func (Ticket) Fields() []ent.Field {
	return []ent.Field{
		field.String("title").
			Comment("The ticket's title, 1–200 characters.").
			MaxLen(800). // 200 characters of up to 4 bytes; the domain checks the character count
			NotEmpty().
			Annotations(entgql.OrderField("TITLE")),
		field.Enum("status").
			Comment("OPEN, DOING or DONE.").
			Values("OPEN", "DOING", "DONE").
			Default("OPEN").
			Annotations(ValueDocs{
				"OPEN":  "Recorded, not yet worked on.",
				"DOING": "Being worked on.",
				"DONE":  "Finished.",
			},
				entgql.OrderField("STATUS")),
		field.Time("created_at").
			Comment("When the ticket was created.").
			Default(time.Now).
			Immutable().
			Annotations(entgql.OrderField("CREATED_AT")),
	}
}

// Indexes of the Ticket.
func (Ticket) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("created_at", "id"),
		index.Fields("status", "created_at", "id"),
	}
}

// Annotations of the Ticket.
func (Ticket) Annotations() []schema.Annotation {
	return []schema.Annotation{
		schema.Comment("An internal support ticket recorded by staff."),
		entgql.QueryField().Description("The support tickets."),
		entgql.RelayConnection(),
	}
}
