package portal_test

import (
	"testing"

	"gatehouse/internal/config"
	"gatehouse/internal/portal"
)

// TestNewNeedsItsSettings: the session lifetime and the name are settings
// (GATEHOUSE_PORTAL_SESSION_TTL, GATEHOUSE_PORTAL_NAME) whose only
// defaults are declared in internal/config; left zero, New refuses them
// rather than invent its own.
func TestNewNeedsItsSettings(t *testing.T) {
	d := config.Defaults().Portal
	for name, cfg := range map[string]portal.Config{
		"no session lifetime": {Name: d.Name},
		"no name":             {SessionTTL: d.SessionTTL},
	} {
		if _, err := portal.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := portal.New(portal.Config{Name: d.Name, SessionTTL: d.SessionTTL}); err != nil {
		t.Fatalf("the settings' defaults: %v", err)
	}
}
