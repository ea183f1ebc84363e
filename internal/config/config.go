// Package config holds the one configuration struct of the process: its
// sections, each setting declared once by struct tags (see Setting), their
// defaults and their validation. The tags generate the flags and GATEHOUSE_*
// environment variables (Flags, FromCommand) and the settings tables of
// docs/configuration.md (go generate); Resolve fills in derived values and
// dev keys, and Validate reports every problem at once.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"gatehouse/internal/requestlog"
	"gatehouse/internal/secret"
	"gatehouse/internal/telemetry"
)

// Config is the whole configuration of a gatehouse process. Each field
// tagged `section` is a section of settings (a struct whose fields carry
// the setting tags, see Setting); the other fields are derived.
type Config struct {
	Server   Server      `section:"server" doc:"Listeners, forwarded headers, the request deadline and shutdown."`
	Shed     Shed        `section:"shed" doc:"Load shedding: what each listener takes on at once, and what it refuses with 503 when the process cannot serve more in time."`
	TLS      TLS         `section:"tls" doc:"HTTPS on the public and admin listeners, and the mutual-TLS listener."`
	Database Database    `section:"database" doc:"The embedded SQLite file or a Postgres server."`
	Redis    Redis       `section:"redis" doc:"The key-value store of nonces, rate limits, the token deny-list and sessions: Redis, or in-process without it."`
	Auth     Auth        `section:"auth" doc:"Keys (stored secrets, signed user tokens) and the bootstrap admin API key."`
	Webhooks Webhooks    `section:"webhooks" doc:"Outbound webhook deliveries."`
	Payments Payments    `section:"payments" doc:"The payment provider that refunds go to."`
	Audit    Audit       `section:"audit" doc:"The admin audit log."`
	API      APIVersions `section:"api" doc:"Lifecycle of partner API versions: release, deprecation, retirement (see [versioning](versioning.md))."`
	Portal   Portal      `section:"portal" doc:"The partner portal's look (see [the portal](portal.md))."`
	Log      Log         `section:"log" doc:"The process log on standard error."`
	Demo     Demo        `section:"demo" doc:"The demo mode of gatehouse serve."`

	// Derived by Resolve.
	MasterKey []byte
	JWTSecret []byte
	// TrustedProxies are the parsed Server.TrustedProxiesRaw.
	TrustedProxies []netip.Prefix
	// ShutdownDrain is Server.ShutdownDrainRaw, or its default for the
	// database.
	ShutdownDrain time.Duration
	// GeneratedKeys lists the dev keys Resolve generated into the data dir.
	GeneratedKeys []string

	// Set by `serve` when the demo is on (Demo.Enabled); not settings.

	// PaymentSandbox is set when the demo started its payment sandbox and
	// pointed Payments.URL at it.
	PaymentSandbox bool
	// WebhookLoopbackApps are app keys whose callbacks may reach loopback
	// addresses although private ones are refused: the demo app only.
	WebhookLoopbackApps []string
	// Tracing is the process's OpenTelemetry tracing, nil when off:
	// gatehouse serve builds it from the standard OTEL_* variables
	// (telemetry.FromEnv), tests pass their own provider.
	Tracing *telemetry.Tracing
}

// Defaults returns the documented defaults: the `default` tags.
func Defaults() Config {
	var c Config
	for _, s := range Settings() {
		s.Field(&c).Set(s.def)
	}
	return c
}

// Embedded reports whether the database is the embedded SQLite file.
func (c *Config) Embedded() bool { return c.Database.Embedded() }

// Validate reports every problem with the raw values at once: each
// section's, prefixed with the section's name, then those across sections.
func (c *Config) Validate() error {
	var errs []error
	v := reflect.ValueOf(c).Elem()
	for _, sec := range sections() {
		err := v.FieldByIndex(sec.index).Addr().Interface().(validator).Validate()
		for _, e := range unjoin(err) {
			errs = append(errs, fmt.Errorf("%s: %w", sec.name, e))
		}
	}
	if c.Database.Postgres() {
		if c.Auth.MasterKeyB64 == "" {
			errs = append(errs, fmt.Errorf("auth: %s is required with a Postgres database: every replica must share it (generate one with: head -c 32 /dev/urandom | base64)", envOf(&c.Auth, &c.Auth.MasterKeyB64)))
		}
		if c.Auth.JWTSecretRaw == "" {
			errs = append(errs, fmt.Errorf("auth: %s is required with a Postgres database: every replica must share it (at least 32 bytes)", envOf(&c.Auth, &c.Auth.JWTSecretRaw)))
		}
	}
	return errors.Join(errs...)
}

// validator is what every section implements.
type validator interface{ Validate() error }

// unjoin lists the errors an errors.Join made, or err alone.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Resolve validates the settings, derives the database URL from the data
// directory when none is given, decodes the keys, and in embedded mode
// generates missing dev keys into the data directory (mode 0600).
func (c *Config) Resolve() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Database.URL == "" {
		c.Database.URL = "sqlite:" + filepath.Join(c.Database.DataDir, "gatehouse.db")
	}
	c.TrustedProxies, _ = ParseTrustedProxies(c.Server.TrustedProxiesRaw) // validated above
	c.ShutdownDrain, _ = c.Server.shutdownDrain(c.Database.Postgres())    // validated above
	if c.Auth.MasterKeyB64 != "" {
		c.MasterKey, _ = secret.ParseKey(c.Auth.MasterKeyB64) // validated above
	}
	if c.Auth.JWTSecretRaw != "" {
		c.JWTSecret = []byte(c.Auth.JWTSecretRaw)
	}
	if c.MasterKey == nil || c.JWTSecret == nil { // embedded: Validate requires both with Postgres
		return c.devKeys()
	}
	return nil
}

// devKeys loads or creates the embedded-mode keys in the data directory.
func (c *Config) devKeys() error {
	dir := c.Database.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if c.MasterKey == nil {
		raw, created, err := loadOrCreate(filepath.Join(dir, "master.key"), func() string {
			return base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
		})
		if err != nil {
			return err
		}
		k, err := secret.ParseKey(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, "master.key"), err)
		}
		c.MasterKey = k
		if created {
			c.GeneratedKeys = append(c.GeneratedKeys, "master.key")
		}
	}
	if c.JWTSecret == nil {
		raw, created, err := loadOrCreate(filepath.Join(dir, "jwt.key"), func() string {
			return base64.RawURLEncoding.EncodeToString(secret.RandomBytes(48))
		})
		if err != nil {
			return err
		}
		// The same floor as GATEHOUSE_JWT_SECRET's: a file left empty or
		// short (by hand, or by a start of an older version killed while
		// it wrote the key) must not sign sessions with next to no key.
		if len(raw) < 32 {
			return fmt.Errorf("%s: holds %d bytes, an HS256 key needs at least 32 (delete the file to have a new key generated; sessions signed with the old one end)",
				filepath.Join(dir, "jwt.key"), len(raw))
		}
		c.JWTSecret = []byte(raw)
		if created {
			c.GeneratedKeys = append(c.GeneratedKeys, "jwt.key")
		}
	}
	return nil
}

// loadOrCreate reads the key in path or, when there is none, stores gen's
// and reports it created. Gatehouses started together on a new data dir
// (serve's lock on it comes later, and other commands take none) must all
// end with the one key the file keeps, and none may read it half written:
// the key is written and synced to a file of its own, which then takes the
// name by a hard link, atomic and refused when the name exists. The loser
// of that race reads the winner's whole key.
func loadOrCreate(path string, gen func() string) (string, bool, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read %s: %w", path, err)
	}
	v := gen()
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*") // mode 0600
	if err != nil {
		return "", false, fmt.Errorf("create %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(v + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	err = os.Link(f.Name(), path)
	if errors.Is(err, os.ErrExist) { // another start won the race
		b, err := os.ReadFile(path)
		if err != nil {
			return "", false, fmt.Errorf("read %s: %w", path, err)
		}
		return strings.TrimSpace(string(b)), false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("create %s: %w", path, err)
	}
	return v, true, nil
}

// NewLogger builds the process logger, writing to w in batches (see
// logWriter), and the function that writes out what is still held: call
// it before the process exits.
func (c *Config) NewLogger(w *os.File) (*slog.Logger, func()) {
	lvl, _ := ParseLevel(c.Log.Level)
	lw := newLogWriter(w)
	// slog's JSON or text handler, which writes the request lines itself
	// (see package requestlog).
	return slog.New(requestlog.NewHandler(lw, c.Log.Format == "json", lvl)), lw.Close
}
