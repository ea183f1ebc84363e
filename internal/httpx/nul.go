package httpx

import (
	"encoding/json"
	"net/url"
	"strings"
)

// MsgNUL is the validation message for a NUL character in any text input.
// NUL is not text: Postgres cannot store it in a text column, and other
// systems truncate at it. Refusing it at every front door makes both
// backends answer the same validation error instead of a database error.
const MsgNUL = "text must not contain the NUL character (U+0000)"

// QueryHasNUL reports whether a raw query string decodes to a NUL
// anywhere (names or values): a URL carries NUL only as %00, since
// net/http refuses raw control characters in the request line.
func QueryHasNUL(rawQuery string) bool { return strings.Contains(rawQuery, "%00") }

// ValuesHaveNUL reports whether any name or value of v holds a NUL.
func ValuesHaveNUL(v url.Values) bool {
	for k, vs := range v {
		if strings.IndexByte(k, 0) >= 0 {
			return true
		}
		for _, s := range vs {
			if strings.IndexByte(s, 0) >= 0 {
				return true
			}
		}
	}
	return false
}

// jsonHasNUL reports whether a JSON document holds a string (or key) with
// a NUL. In valid JSON a NUL can only be written as the escape \u0000, so
// documents without that text are not decoded again.
func jsonHasNUL(raw []byte) bool {
	if !strings.Contains(strings.ToLower(string(raw)), `\u0000`) {
		return false
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false
	}
	return ValueHasNUL(v)
}

// ValueHasNUL reports whether decoded JSON (strings, arrays, objects and
// their keys) holds a NUL anywhere.
func ValueHasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case []any:
		for _, e := range x {
			if ValueHasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 || ValueHasNUL(e) {
				return true
			}
		}
	}
	return false
}
