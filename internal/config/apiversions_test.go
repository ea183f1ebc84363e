package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseVersionDates(t *testing.T) {
	got, err := ParseVersionDates(" v1=2026-06-30 , v2=2027-01-01T12:00:00+02:00,")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got["v1"].Equal(time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)) || !got["v2"].Equal(time.Date(2027, 1, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("%v", got)
	}
	if got, err := ParseVersionDates(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{"v1", "v1=", "1=2026-01-01", "V1=2026-01-01", "v1=tomorrow", "v1=2026-13-01", "v1=2026-01-01,v1=2026-02-01"} {
		if _, err := ParseVersionDates(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c := Defaults()
	c.API.Deprecated, c.API.Sunset = "v1=soon", "x"
	err = c.Validate()
	if err == nil || !strings.Contains(err.Error(), "GATEHOUSE_API_DEPRECATED") || !strings.Contains(err.Error(), "GATEHOUSE_API_SUNSET") {
		t.Fatalf("Validate: %v", err)
	}
}
