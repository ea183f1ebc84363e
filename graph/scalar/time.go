// Package scalar holds the admin schema's custom scalar marshalling.
package scalar

import (
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// TimeFormat is the one form of every Time the admin schema shows: RFC 3339
// in UTC with exactly three decimals (milliseconds), as the partner API and
// the webhooks write times. The stores keep times at different precisions
// (milliseconds, microseconds, nanoseconds on SQLite); the API shows them
// alike, cut (not rounded) to the millisecond.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalTime writes the GraphQL Time scalar in TimeFormat, so that every
// time the API shows reads the same whatever the field, the store and the
// database session's time zone.
func MarshalTime(t time.Time) graphql.Marshaler {
	if t.IsZero() {
		return graphql.Null
	}
	return graphql.WriterFunc(func(w io.Writer) {
		_, _ = io.WriteString(w, strconv.Quote(t.UTC().Format(TimeFormat)))
	})
}

// UnmarshalTime reads the GraphQL Time scalar: an RFC 3339 time
// ("2026-11-22T10:00:00Z", "2026-11-22T18:00:00+08:00") or a date alone
// ("2026-11-22"), which means midnight UTC of that day. Anything else is
// ErrTime.
func UnmarshalTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, ErrTime
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, ErrTime
}
