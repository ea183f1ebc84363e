package graph

import (
	"fmt"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/graph/guard"
)

// MaxPageSize bounds `first` and `last` on every connection (the limit
// the guards check before anything runs).
const MaxPageSize = guard.MaxPageSize

// pageBounds checks first/last and, when the caller gave neither, asks for
// the first MaxPageSize items so that no query returns a whole table.
func pageBounds(first, last *int) (*int, *int, error) {
	for name, v := range map[string]*int{"first": first, "last": last} {
		if v != nil && (*v < 0 || *v > MaxPageSize) {
			return nil, nil, &gqlerror.Error{
				Message:    fmt.Sprintf("%s must be between 0 and %d", name, MaxPageSize),
				Extensions: map[string]any{"code": "VALIDATION_FAILED"},
			}
		}
	}
	if first == nil && last == nil {
		n := MaxPageSize
		first = &n
	}
	return first, last, nil
}
