package graph

import (
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/graph/guard"
)

// validationError is a VALIDATION_FAILED error raised by the admin layer itself.
func validationError(field, msg string) error {
	return &gqlerror.Error{
		Message:    field + ": " + msg,
		Extensions: map[string]any{"code": guard.CodeValidationFailed, "field": field},
	}
}
