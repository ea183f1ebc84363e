package config

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Defaults()
	c.Server.Addr = "nope"
	c.Database.URL = "mysql://x"
	c.Redis.URL = "http://x"
	c.Log.Level = "loud"
	c.Log.Format = "xml"
	c.TLS.Cert = "cert.pem"
	err := c.Validate()
	if err == nil {
		t.Fatal("want error")
	}
	for _, want := range []string{"GATEHOUSE_ADDR", "GATEHOUSE_DATABASE_URL", "GATEHOUSE_REDIS_URL", "GATEHOUSE_LOG_LEVEL", "GATEHOUSE_LOG_FORMAT", "GATEHOUSE_TLS_KEY"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
}

func TestPostgresNeedsSharedKeys(t *testing.T) {
	c := Defaults()
	c.Database.DataDir = t.TempDir()
	c.Database.URL = "postgres://localhost/x"
	err := c.Resolve()
	if err == nil || !strings.Contains(err.Error(), "GATEHOUSE_MASTER_KEY") || !strings.Contains(err.Error(), "GATEHOUSE_JWT_SECRET") {
		t.Fatalf("want both keys reported, got %v", err)
	}
	if entries, _ := os.ReadDir(c.Database.DataDir); len(entries) != 0 {
		t.Fatal("keys generated for a Postgres deployment")
	}
}

func TestEmbeddedGeneratesDevKeysOnce(t *testing.T) {
	dir := t.TempDir()
	c := Defaults()
	c.Database.DataDir = dir
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	if c.Database.URL != "sqlite:"+filepath.Join(dir, "gatehouse.db") {
		t.Fatalf("database url %q", c.Database.URL)
	}
	if len(c.MasterKey) != 32 || len(c.JWTSecret) < 32 || len(c.GeneratedKeys) != 2 {
		t.Fatalf("keys: %d %d %v", len(c.MasterKey), len(c.JWTSecret), c.GeneratedKeys)
	}
	for _, f := range []string{"master.key", "jwt.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, err, st)
		}
	}
	again := Defaults()
	again.Database.DataDir = dir
	if err := again.Resolve(); err != nil {
		t.Fatal(err)
	}
	if string(again.MasterKey) != string(c.MasterKey) || string(again.JWTSecret) != string(c.JWTSecret) || len(again.GeneratedKeys) != 0 {
		t.Fatal("second start did not reuse the generated keys")
	}
}

func TestKeyValidation(t *testing.T) {
	c := Defaults()
	c.Database.DataDir = t.TempDir()
	c.Auth.MasterKeyB64 = base64.StdEncoding.EncodeToString([]byte("short"))
	c.Auth.JWTSecretRaw = "too-short"
	err := c.Resolve()
	if err == nil || !strings.Contains(err.Error(), "GATEHOUSE_MASTER_KEY") || !strings.Contains(err.Error(), "GATEHOUSE_JWT_SECRET") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "too-short") {
		t.Fatal("error echoes the secret")
	}
}

func TestSQLiteSync(t *testing.T) {
	if got := Defaults().Database.SQLiteSync; got != "full" {
		t.Fatalf("default GATEHOUSE_SQLITE_SYNC = %q, want full", got)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"full", true}, {"normal", true}, {"NORMAL", true}, {"off", false}, {"extra", false}, {"", false}} {
		c := Defaults()
		c.Database.SQLiteSync = tc.value
		err := c.Database.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%q: err = %v, want ok = %v", tc.value, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "GATEHOUSE_SQLITE_SYNC") {
			t.Errorf("%q: error does not name the variable: %v", tc.value, err)
		}
	}
}

// The drain defaults to 5s with Postgres (a rolling restart behind a
// balancer loses nothing) and to none embedded; a set value wins.
func TestShutdownDrainDefaultsByDatabase(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, c := range []struct {
		url, raw string
		want     string
	}{
		{"postgres://localhost/x", "", "5s"},
		{"", "", "0s"},
		{"postgres://localhost/x", "0s", "0s"},
		{"", "3s", "3s"},
	} {
		cfg := Defaults()
		cfg.Database.DataDir = t.TempDir()
		cfg.Database.URL = c.url
		cfg.Server.ShutdownDrainRaw = c.raw
		cfg.Auth.MasterKeyB64, cfg.Auth.JWTSecretRaw = key, strings.Repeat("j", 32)
		if err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		if got := cfg.ShutdownDrain.String(); got != c.want {
			t.Errorf("url %q, drain %q: %s, want %s", c.url, c.raw, got, c.want)
		}
	}
	cfg := Defaults()
	cfg.Server.ShutdownDrainRaw = "2m"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "GATEHOUSE_SHUTDOWN_DRAIN") {
		t.Errorf("a 2m drain: %v", err)
	}
}

func TestDatabasePoolSettings(t *testing.T) {
	cfg := Defaults()
	cfg.Database.URL = "sqlite:x.db"
	cfg.Database.DirectURL = "postgres://db/x"
	cfg.Database.MaxConns = 0
	cfg.Database.ReadConns = -1
	err := cfg.Validate()
	for _, want := range []string{"GATEHOUSE_DATABASE_DIRECT_URL: set without a Postgres", "GATEHOUSE_DATABASE_MAX_CONNS", "GATEHOUSE_DATABASE_READ_CONNS"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s: %v", want, err)
		}
	}
	cfg = Defaults()
	cfg.Database.URL = "postgres://pgbouncer:6432/x"
	cfg.Database.DirectURL = "mysql://db/x"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "GATEHOUSE_DATABASE_DIRECT_URL: must start with postgres://") {
		t.Errorf("a direct URL of another scheme: %v", err)
	}
}
