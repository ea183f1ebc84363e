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
