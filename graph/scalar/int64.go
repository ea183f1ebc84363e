package scalar

import (
	"encoding/json"
	"io"
	"math"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalInt64 writes the GraphQL Int64 scalar: the integer as a JSON
// string of base-10 digits, which no client's number type can overflow
// or round (a JavaScript number is exact only up to 2^53).
func MarshalInt64(n int64) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		_, _ = io.WriteString(w, strconv.Quote(strconv.FormatInt(n, 10)))
	})
}

// UnmarshalInt64 reads the GraphQL Int64 scalar: a string of base-10
// digits with an optional leading minus, an integer literal, or a JSON
// number that is a whole number in range. Anything else is ErrInt64.
func UnmarshalInt64(v any) (int64, error) {
	switch x := v.(type) {
	case string:
		if x == "" || x[0] == '+' {
			return 0, ErrInt64
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, ErrInt64
		}
		return n, nil
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, ErrInt64
		}
		return n, nil
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float64:
		// Exact only up to 2^53; a larger float64 may already be rounded.
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, ErrInt64
		}
		return int64(x), nil
	}
	return 0, ErrInt64
}
