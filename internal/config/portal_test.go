package config

import (
	"strings"
	"testing"
	"time"
)

// TestPortalSettings: the colour must be #rrggbb (it goes into a
// stylesheet), the name 1-80 characters, the session 1s to 24h.
func TestPortalSettings(t *testing.T) {
	c := Defaults()
	if err := c.Portal.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c.Portal.Color = "#0b4fA3"
	if err := c.Portal.Validate(); err != nil {
		t.Fatalf("#0b4fA3: %v", err)
	}
	for _, bad := range []Portal{
		{Name: "x", SessionTTL: time.Hour, Color: "red"},
		{Name: "x", SessionTTL: time.Hour, Color: "#0b4fa3;}body{display:none"},
		{Name: "", SessionTTL: time.Hour},
		{Name: strings.Repeat("n", 81), SessionTTL: time.Hour},
		{Name: "x", SessionTTL: 25 * time.Hour},
		{Name: "x", SessionTTL: 0},
	} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "GATEHOUSE_PORTAL_") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
