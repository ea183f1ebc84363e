package httpx

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DecodeError is a request body that could not be read as JSON, with the
// status and error code to answer.
type DecodeError struct {
	Status int
	Code   string
	Msg    string
}

func (e *DecodeError) Error() string { return e.Msg }

// CheckJSONContentType accepts application/json, any +json type, a missing
// Content-Type, and application/x-www-form-urlencoded — what `curl -d`
// sends by default — as long as the body then parses as JSON. Anything else
// is 415.
func CheckJSONContentType(r *http.Request) *DecodeError {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/x-www-form-urlencoded") {
		return nil
	}
	return &DecodeError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Msg: "Content-Type must be application/json"}
}

// DecodeObject reads the body as one JSON object into a map of raw fields,
// so that callers can tell a missing field from a field of the wrong type.
func DecodeObject(r *http.Request) (map[string]json.RawMessage, *DecodeError) {
	return DecodeObjectLimit(r, MaxBodyBytes)
}

// DecodeObjectLimit is DecodeObject for a route whose bodies may be
// larger than MaxBodyBytes, up to limit bytes (the publish API's); the
// body must not be capped lower already.
func DecodeObjectLimit(r *http.Request, limit int64) (map[string]json.RawMessage, *DecodeError) {
	if derr := CheckJSONContentType(r); derr != nil {
		return nil, derr
	}
	if r.ContentLength > limit { // announced too large: do not read it
		return nil, classify(&http.MaxBytesError{Limit: limit})
	}
	r.Body = http.MaxBytesReader(nil, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, classify(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, classify(err)
		}
		return nil, &DecodeError{Status: http.StatusBadRequest, Code: "invalid_json", Msg: "request body must hold a single JSON value"}
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD and
	// store text the caller never sent.
	if !utf8.Valid(raw) {
		return nil, &DecodeError{Status: http.StatusBadRequest, Code: "invalid_json", Msg: "request body is not valid UTF-8"}
	}
	if jsonHasNUL(raw) {
		return nil, &DecodeError{Status: http.StatusBadRequest, Code: "validation_failed", Msg: MsgNUL}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, &DecodeError{Status: http.StatusBadRequest, Code: "validation_failed", Msg: "request body must be a JSON object"}
	}
	return obj, nil
}

func classify(err error) *DecodeError {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return &DecodeError{Status: http.StatusRequestEntityTooLarge, Code: "payload_too_large", Msg: "request body must be at most " + sizeText(mbe.Limit)}
	case errors.Is(err, io.EOF):
		return &DecodeError{Status: http.StatusBadRequest, Code: "invalid_json", Msg: "request body is empty; expected a JSON object"}
	default:
		return &DecodeError{Status: http.StatusBadRequest, Code: "invalid_json", Msg: "request body is not valid JSON"}
	}
}

// StringField returns obj[name] when it is a JSON string. present is false
// when the field is absent or null; ok is false when it has another type.
func StringField(obj map[string]json.RawMessage, name string) (v string, present, ok bool) {
	raw, found := obj[name]
	if !found || string(raw) == "null" {
		return "", false, true
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", true, false
	}
	return v, true, true
}

// sizeText writes a byte limit as people read it: "64 KiB", "8 MiB".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
