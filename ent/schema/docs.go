package schema

// ValueDocs describes each value of an enum field for the GraphQL schema:
// ent/entc.go copies the entries onto the enum's values and refuses an
// enum field whose values are not all described.
type ValueDocs map[string]string

// Name implements schema.Annotation.
func (ValueDocs) Name() string { return "ValueDocs" }
