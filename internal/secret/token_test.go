package secret

import (
	"regexp"
	"strings"
	"testing"
)

func TestRandomBytes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 16, 32, 100} {
		if got := len(RandomBytes(n)); got != n {
			t.Errorf("RandomBytes(%d) has %d bytes", n, got)
		}
	}
	if a, b := RandomBytes(32), RandomBytes(32); string(a) == string(b) {
		t.Error("two draws of 32 random bytes are equal")
	}
}

func TestRandomToken(t *testing.T) {
	t.Parallel()
	urlSafe := regexp.MustCompile(`^[A-Za-z0-9_-]*$`)
	seen := map[string]bool{}
	for range 1000 {
		tok := RandomToken("gh_", 32)
		body, ok := strings.CutPrefix(tok, "gh_")
		if !ok || len(body) != 43 || !urlSafe.MatchString(body) {
			t.Fatalf("RandomToken = %q; want gh_ and 43 URL-safe characters without padding", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q repeated", tok)
		}
		seen[tok] = true
	}
	if tok := RandomToken("", 16); len(tok) != 22 {
		t.Errorf("RandomToken(\"\", 16) = %q, want 22 characters", tok)
	}
}

func TestHashToken(t *testing.T) {
	t.Parallel()
	// FIPS 180-2 test vector.
	if got := HashToken("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("HashToken(abc) = %s", got)
	}
	if HashToken("a") == HashToken("b") {
		t.Error("different tokens hash alike")
	}
}
