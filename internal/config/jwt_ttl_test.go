package config

import (
	"strings"
	"testing"
	"time"
)

func TestJWTTTL(t *testing.T) {
	if d := Defaults().Auth.JWTTTL; d != 7_200_000*time.Millisecond {
		t.Fatalf("default JWT lifetime %v, want 7 200 000 ms", d)
	}
	for _, bad := range []time.Duration{0, -time.Second, 999 * time.Millisecond} {
		c := Defaults()
		c.Auth.JWTTTL = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "GATEHOUSE_JWT_TTL") {
			t.Errorf("JWTTTL %v: %v", bad, err)
		}
	}
	c := Defaults()
	c.Auth.JWTTTL = 90 * time.Second
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
