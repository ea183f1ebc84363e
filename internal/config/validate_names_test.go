package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// invalidConfigs are configurations that, together, reach every message
// of Validate (some exclude each other, hence several).
func invalidConfigs() []Config {
	c := Defaults()
	c.Server.Addr, c.Server.AdminAddr, c.Server.TrustedProxiesRaw, c.Server.PublicURL = "x", "y", "zz", "ftp://a"
	c.Server.RequestTimeout, c.Server.ShutdownDrainRaw, c.Server.ReadyRequires = 0, "2m", "foo"
	c.Shed.MinConcurrency, c.Shed.MaxConcurrency, c.Shed.QueueBudget, c.Shed.Reserve = 0, 2_000_000, 0, -1
	c.TLS.MTLSAddr, c.TLS.Cert = "q", "c"
	c.Database.DataDir, c.Database.URL, c.Database.SQLiteSync = "", "sqlite:", "x"
	c.Database.DirectURL, c.Database.MaxConns, c.Database.ReadConns = "postgres://a", 0, -1
	c.Redis.URL, c.Redis.NonceMemoryMax = "http://x", 0
	c.Auth.MasterKeyB64, c.Auth.JWTSecretRaw, c.Auth.JWTTTL = "zz", "short", 0
	c.Auth.BootstrapAPIKey = strings.Repeat("k", 300)
	c.Webhooks.RetryBase, c.Webhooks.PerApp, c.Webhooks.Retention, c.Webhooks.Proxy = 0, 0, time.Minute, "ftp://x"
	c.Payments.URL, c.Payments.APIKey, c.Payments.Secret = "ftp://x", "a b", strings.Repeat("s", 2000)
	c.Audit.Retention = -1
	c.API.Released, c.API.Deprecated, c.API.Sunset = "x", "y", "z"
	c.Portal.Name, c.Portal.SessionTTL, c.Portal.Color = "", 0, "red"
	c.Log.Level, c.Log.Format = "loud", "xml"
	c.Demo.Receiver, c.Demo.Reset = "r", true

	d := Defaults()
	d.Demo.Reset = true
	d.Database.URL, d.Database.DirectURL = "postgres://a", "mysql://x"
	d.Redis.CA = "ca"
	d.Payments.APIKey, d.Payments.Secret = "k", "s"

	e := Defaults()
	e.Database.URL = "mysql://a"
	e.Payments.URL = "https://u:p@x"

	f := Defaults()
	f.Payments.URL = "https://x?q"
	return []Config{c, d, e, f}
}

// TestValidateMessages pins the text of every Validate message (docs and
// operators quote them) and checks that each names, first, a setting its
// section declares: the names come from the declarations (envOf), and a
// renamed setting changes its messages with it.
func TestValidateMessages(t *testing.T) {
	var got []string
	for _, c := range invalidConfigs() {
		for _, e := range unjoin(c.Validate()) {
			got = append(got, e.Error())
		}
	}
	want, err := os.ReadFile("testdata/validate-errors.golden")
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(got, "\n") + "\n"; g != string(want) {
		t.Errorf("Validate's messages changed; got:\n%s\nwant (testdata/validate-errors.golden):\n%s", g, want)
	}
	envs := map[string]string{} // env → section
	for _, s := range Settings() {
		envs[s.Env] = s.Section
	}
	lead := regexp.MustCompile(`^([a-z]+): (GATEHOUSE_[A-Z_]+)`)
	for _, msg := range got {
		m := lead.FindStringSubmatch(msg)
		if m == nil || envs[m[2]] != m[1] {
			t.Errorf("%q does not start with a setting of its section", msg)
		}
	}
}

func TestEnvOfRefusesOtherFields(t *testing.T) {
	w := Defaults().Webhooks
	if got := envOf(&w, &w.PerApp); got != "GATEHOUSE_WEBHOOK_PER_APP" {
		t.Errorf("envOf(PerApp) = %q", got)
	}
	var elsewhere int
	for _, field := range []any{&elsewhere, w.PerApp, &w} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("envOf(%T) did not panic", field)
				}
			}()
			envOf(&w, field)
		}()
	}
}
