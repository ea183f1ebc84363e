package errs

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text trims surrounding white space from v and checks that what is left
// is text fit to store in field: valid UTF-8, at most maxLen characters,
// no control characters. Its errors are validation errors naming field.
// An empty result is allowed; callers that require a value check for it.
func Text(field, v string, maxLen int) (string, error) {
	v = strings.TrimSpace(v)
	switch {
	case !utf8.ValidString(v):
		return "", Invalid(field, "must be valid UTF-8")
	case utf8.RuneCountInString(v) > maxLen:
		return "", Invalid(field, "must be at most %d characters", maxLen)
	case strings.ContainsFunc(v, unicode.IsControl):
		return "", Invalid(field, "must not contain control characters")
	}
	return v, nil
}
