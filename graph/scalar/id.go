package scalar

import (
	"encoding/json"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalID writes an id as GraphQL's ID: a JSON string of digits.
func MarshalID(id int) graphql.Marshaler { return graphql.MarshalIntID(id) }

// UnmarshalID reads GraphQL's ID as an int: a string of base-10 digits
// (optionally signed: an id that cannot exist is then not found) or an
// integer. Anything else, or a number out of int's range, is ErrID, never
// strconv's text.
func UnmarshalID(v any) (int, error) {
	var s string
	switch x := v.(type) {
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case int32:
		return int(x), nil
	case string:
		s = x
	case json.Number:
		s = string(x)
	default:
		return 0, ErrID
	}
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	if err != nil {
		return 0, ErrID
	}
	return int(n), nil
}
