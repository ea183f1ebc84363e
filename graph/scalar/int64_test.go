package scalar

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func TestInt64(t *testing.T) {
	for in, want := range map[any]int64{
		"999999999999999":           999999999999999,
		"-5":                        -5,
		"0":                         0,
		"9223372036854775807":       math.MaxInt64,
		json.Number("12"):           12,
		int64(999999999999999):      999999999999999,
		7:                           7,
		float64(1 << 53):            1 << 53,
		"-9223372036854775808":      math.MinInt64,
		json.Number("-42"):          -42,
		float64(999999999999999.0):  999999999999999,
		int32(3):                    3,
		"0000000000000000000000001": 1,
	} {
		got, err := UnmarshalInt64(in)
		if err != nil || got != want {
			t.Errorf("%#v: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []any{"", "+5", "1e3", "12.5", " 1", "9223372036854775808", json.Number("1.5"), 1.5, float64(1<<53) * 2, true, nil, []any{1}} {
		if n, err := UnmarshalInt64(bad); err == nil {
			t.Errorf("%#v accepted as %d", bad, n)
		}
	}
	var buf bytes.Buffer
	MarshalInt64(999999999999999).MarshalGQL(&buf)
	if buf.String() != `"999999999999999"` {
		t.Fatalf("marshal: %s", buf.String())
	}
}
