package scalar

import (
	"bytes"
	"testing"
	"time"
)

func TestTime(t *testing.T) {
	in := map[string]time.Time{
		"2026-11-22T10:00:00Z":                time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		"2026-11-22T18:00:00.5+08:00":         time.Date(2026, 11, 22, 10, 0, 0, 5e8, time.UTC),
		"2026-11-22":                          time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
		"2028-02-29":                          time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC),
		"2026-11-22T10:00:00.123456789Z":      time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC),
		"2026-11-22T10:00:00.000000001-00:00": time.Date(2026, 11, 22, 10, 0, 0, 1, time.UTC),
	}
	for s, want := range in {
		got, err := UnmarshalTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v %v, want %v", s, got, err, want)
		}
	}
	for _, bad := range []any{"", "2026-13-01", "2027-02-29", "22/11/2026", "2026-11-22 10:00:00", "now", 1763805600, nil, true} {
		if _, err := UnmarshalTime(bad); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
	var buf bytes.Buffer
	MarshalTime(time.Date(2026, 11, 22, 18, 0, 0, 123e6, time.FixedZone("CST", 8*3600))).MarshalGQL(&buf)
	if buf.String() != `"2026-11-22T10:00:00.123Z"` {
		t.Fatalf("marshal: %s", buf.String())
	}
	// One precision whatever the value holds: three decimals, cut.
	for in, want := range map[time.Time]string{
		time.Date(2031, 5, 17, 0, 0, 0, 0, time.UTC):                      `"2031-05-17T00:00:00.000Z"`,
		time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC):            `"2026-11-22T10:00:00.123Z"`,
		time.Date(2026, 11, 22, 10, 0, 0, 999999, time.UTC):               `"2026-11-22T10:00:00.000Z"`,
		time.Date(2026, 11, 22, 10, 0, 0, 5e8, time.FixedZone("", -3600)): `"2026-11-22T11:00:00.500Z"`,
	} {
		buf.Reset()
		MarshalTime(in).MarshalGQL(&buf)
		if buf.String() != want {
			t.Errorf("marshal %v: %s, want %s", in, buf.String(), want)
		}
	}
	buf.Reset()
	MarshalTime(time.Time{}).MarshalGQL(&buf)
	if buf.String() != "null" {
		t.Fatalf("zero time: %s", buf.String())
	}
}
