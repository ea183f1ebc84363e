package secret

import (
	"strings"
	"testing"
)

func TestEqual(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{"key", "key", true},
		{"key", "Key", false},
		{"key", "key ", false},
		{"key", "", false},
		{"k\x00", "k", false},
	} {
		if got := Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestEqualHexFold(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{"0123456789abcdef", "0123456789ABCDEF", true},
		{"d41d8cd98f00b204e9800998ecf8427e", "D41D8CD98F00B204E9800998ECF8427E", true},
		{"d41d8cd98f00b204e9800998ecf8427e", "d41d8cd98f00b204e9800998ecf8427f", false},
		{"abc", "abcd", false},
		{"abc", "", false},
		{"0", "\x10", false}, // '\x10'|0x20 == '0'
		{"a", "A", true},
		{"a", "!", false},   // 'A'|0x20 and '!' differ, but...
		{"`", "@", false},   // ...these fold alike and are not hex
		{"zz", "zz", false}, // equal, but not hex
		{"g", "G", false},
		{"1:", "1:", false},
	} {
		if got := EqualHexFold(tt.a, tt.b); got != tt.want {
			t.Errorf("EqualHexFold(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdefABCDEF") == ""
}

// FuzzEqualHexFold compares the constant-time helper with the obvious
// branching definition.
func FuzzEqualHexFold(f *testing.F) {
	f.Add("abc", "ABC")
	f.Add("0", "\x10")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		want := len(a) == len(b) && isHex(a) && isHex(b) && strings.EqualFold(a, b)
		if got := EqualHexFold(a, b); got != want {
			t.Fatalf("EqualHexFold(%q, %q) = %v, want %v", a, b, got, want)
		}
	})
}
