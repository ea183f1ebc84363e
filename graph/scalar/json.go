package scalar

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalRawJSON writes the GraphQL JSON scalar: the JSON value itself
// (object, array, string, number, …), or null for nil. The value must be
// valid JSON (see ParseJSON).
func MarshalRawJSON(v json.RawMessage) graphql.Marshaler {
	if v == nil {
		return graphql.Null
	}
	return graphql.WriterFunc(func(w io.Writer) { _, _ = w.Write(v) })
}

// UnmarshalRawJSON reads the GraphQL JSON scalar from any input value.
func UnmarshalRawJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(emptyLists(v))
	if err != nil {
		return nil, errors.New("not a JSON value")
	}
	return b, nil
}

// ParseJSON returns s as a compact JSON value when s is valid JSON, and
// nil (GraphQL null) when it is not: stored text that happens to be JSON
// (a webhook body, headers) is then shown as a value, not as a string.
func ParseJSON(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil
	}
	return buf.Bytes()
}

// emptyLists keeps an empty list of an inline literal ({lines: []}, which
// the parser hands over as a nil slice) an empty list rather than null.
func emptyLists(v any) any {
	switch x := v.(type) {
	case []any:
		if x == nil {
			return []any{}
		}
		for i, e := range x {
			x[i] = emptyLists(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = emptyLists(e)
		}
	}
	return v
}
