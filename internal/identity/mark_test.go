package identity

import (
	"math"
	"testing"
)

// TestUserMarks: the shared store's per-user mark says the instant and
// the version; a mark of an earlier release (the instant alone) still
// reads, and an unreadable one refuses every token of the user.
func TestUserMarks(t *testing.T) {
	if got := string(formatMark(userRevocation{at: 1700000000123, version: 4})); got != "1700000000123:4" {
		t.Fatalf("formatMark: %q", got)
	}
	for in, want := range map[string]userRevocation{
		"1700000000123:4": {at: 1700000000123, version: 4},
		"1700000000123":   {at: 1700000000123},
		"":                {at: math.MaxInt64},
		"x":               {at: math.MaxInt64},
		"1700000000123:x": {at: math.MaxInt64},
	} {
		if got := parseMark([]byte(in)); got != want {
			t.Errorf("parseMark(%q) = %+v, want %+v", in, got, want)
		}
	}
}
