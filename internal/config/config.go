// Package config holds the one configuration struct of the process, its
// defaults, and its validation. Values come from flags or GATEHOUSE_*
// environment variables (see cmd/gatehouse); Resolve fills in derived
// defaults and dev keys, and Validate reports every problem at once.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gatehouse/internal/requestlog"
	"gatehouse/internal/secret"
)

// Config is the whole configuration of a gatehouse process.
type Config struct {
	Addr        string // public listener
	AdminAddr   string // admin listener (GraphQL, Playground, /metrics)
	DataDir     string
	DatabaseURL string // sqlite:PATH or postgres://…
	RedisURL    string // empty: in-process store
	// RedisKeyPrefix starts every Redis key, so deployments (and tests) can
	// share one Redis server.
	RedisKeyPrefix string

	MasterKeyB64    string // GATEHOUSE_MASTER_KEY, base64 of 32 bytes
	JWTSecretRaw    string // GATEHOUSE_JWT_SECRET
	BootstrapAPIKey string
	// JWTTTL is the lifetime of signed user tokens (GATEHOUSE_JWT_TTL,
	// default 7 200 000 ms).
	JWTTTL time.Duration

	TLSCert  string
	TLSKey   string
	MTLSAddr string
	ClientCA string
	// TrustedProxiesRaw is GATEHOUSE_TRUSTED_PROXIES: comma-separated CIDRs
	// (or single addresses) of the reverse proxies whose X-Forwarded-For
	// and X-Forwarded-Proto are believed. Empty: none is.
	TrustedProxiesRaw string

	// RequestTimeout bounds every request's database and key-value work
	// (GATEHOUSE_REQUEST_TIMEOUT, default 10s).
	RequestTimeout time.Duration
	// RedisAllowEviction lets the process start on a Redis whose
	// maxmemory-policy may evict keys (GATEHOUSE_REDIS_ALLOW_EVICTION).
	RedisAllowEviction bool

	WebhookRetryBase    time.Duration
	WebhookAllowPrivate bool
	// WebhookPerApp caps the attempts of one app in flight at once, over
	// all replicas (GATEHOUSE_WEBHOOK_PER_APP, default 4).
	WebhookPerApp int
	// WebhookRetention is how long deliveries in a final state and their
	// attempts are kept (GATEHOUSE_WEBHOOK_RETENTION, default 720h; 0
	// keeps them forever).
	WebhookRetention time.Duration
	// WebhookLoopbackApps are app keys whose callbacks may reach loopback
	// addresses although private ones are refused: set by `serve --demo`
	// for the demo app only.
	WebhookLoopbackApps []string
	// DemoReceiver is the address of the webhook receiver the demo app
	// calls back (`gatehouse webhook listen`; `serve --demo-receiver`).
	DemoReceiver string

	// PaymentURL is the payment provider's base URL (refunds go to
	// PaymentURL/refunds); empty: no provider, refundOrder answers
	// PAYMENT_NOT_CONFIGURED. Loopback addresses are allowed.
	PaymentURL string
	// PaymentAPIKey (X-API-Key) and PaymentSecret (the HMAC key of
	// X-Signature) identify gatehouse to the provider. Never logged.
	PaymentAPIKey string
	PaymentSecret string
	// AuditRetention is how long admin audit events are kept
	// (GATEHOUSE_AUDIT_RETENTION, default 8760h; 0 keeps them forever).
	AuditRetention time.Duration

	// ShutdownDrain is how long /readyz answers 503 after SIGTERM before
	// the listeners stop accepting, so that load balancers stop routing
	// new requests first. 0 (the default) stops at once.
	ShutdownDrain time.Duration

	// APIDeprecated and APISunset announce the retirement of partner API
	// versions: "v1=2026-06-30,…" (see ParseVersionDates).
	APIDeprecated string
	APISunset     string

	LogLevel  string
	LogFormat string

	// Derived by Resolve.
	MasterKey []byte
	JWTSecret []byte
	// TrustedProxies are the parsed TrustedProxiesRaw.
	TrustedProxies []netip.Prefix
	// GeneratedKeys lists the dev keys Resolve generated into DataDir.
	GeneratedKeys []string
	// PaymentSandbox is set (never from the environment) by `serve --demo`
	// when it started the demo's payment sandbox and pointed PaymentURL at it.
	PaymentSandbox bool
}

// DefaultRequestTimeout is the default of GATEHOUSE_REQUEST_TIMEOUT.
const DefaultRequestTimeout = 10 * time.Second

// Defaults returns the documented defaults.
func Defaults() Config {
	return Config{
		Addr:             "127.0.0.1:8080",
		AdminAddr:        "127.0.0.1:8081",
		DataDir:          "./data",
		RedisKeyPrefix:   "gatehouse:",
		WebhookRetryBase: time.Second,
		AuditRetention:   8760 * time.Hour,
		WebhookPerApp:    4,
		WebhookRetention: 720 * time.Hour,
		DemoReceiver:     "127.0.0.1:9099",
		RequestTimeout:   DefaultRequestTimeout,
		JWTTTL:           7_200_000 * time.Millisecond,
		LogLevel:         "info",
		LogFormat:        "text",
	}
}

// Embedded reports whether the database is the embedded SQLite file.
func (c *Config) Embedded() bool { return strings.HasPrefix(c.DatabaseURL, "sqlite:") }

// Resolve derives the database URL from the data directory when none is
// given, decodes the keys, and in embedded mode generates missing dev keys
// into the data directory (mode 0600). It then validates the result.
func (c *Config) Resolve() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = "sqlite:" + filepath.Join(c.DataDir, "gatehouse.db")
	}
	var errs []error
	c.TrustedProxies, _ = ParseTrustedProxies(c.TrustedProxiesRaw) // validated above
	if c.MasterKeyB64 != "" {
		k, err := secret.ParseKey(c.MasterKeyB64)
		if err != nil {
			errs = append(errs, fmt.Errorf("GATEHOUSE_MASTER_KEY: %w", err))
		}
		c.MasterKey = k
	}
	if c.JWTSecretRaw != "" {
		if len(c.JWTSecretRaw) < 32 {
			errs = append(errs, errors.New("GATEHOUSE_JWT_SECRET: must be at least 32 bytes"))
		}
		c.JWTSecret = []byte(c.JWTSecretRaw)
	}
	missing := c.MasterKey == nil && c.MasterKeyB64 == "" || c.JWTSecret == nil && c.JWTSecretRaw == ""
	if missing && !c.Embedded() {
		if c.MasterKeyB64 == "" {
			errs = append(errs, errors.New("GATEHOUSE_MASTER_KEY is required with a Postgres database: every replica must share it (generate one with: head -c 32 /dev/urandom | base64)"))
		}
		if c.JWTSecretRaw == "" {
			errs = append(errs, errors.New("GATEHOUSE_JWT_SECRET is required with a Postgres database: every replica must share it (at least 32 bytes)"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if missing {
		if err := c.devKeys(); err != nil {
			return err
		}
	}
	return nil
}

// devKeys loads or creates the embedded-mode keys in the data directory.
func (c *Config) devKeys() error {
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if c.MasterKey == nil {
		raw, created, err := loadOrCreate(filepath.Join(c.DataDir, "master.key"), func() string {
			return base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
		})
		if err != nil {
			return err
		}
		k, err := secret.ParseKey(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(c.DataDir, "master.key"), err)
		}
		c.MasterKey = k
		if created {
			c.GeneratedKeys = append(c.GeneratedKeys, "master.key")
		}
	}
	if c.JWTSecret == nil {
		raw, created, err := loadOrCreate(filepath.Join(c.DataDir, "jwt.key"), func() string {
			return base64.RawURLEncoding.EncodeToString(secret.RandomBytes(48))
		})
		if err != nil {
			return err
		}
		c.JWTSecret = []byte(raw)
		if created {
			c.GeneratedKeys = append(c.GeneratedKeys, "jwt.key")
		}
	}
	return nil
}

func loadOrCreate(path string, gen func() string) (string, bool, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read %s: %w", path, err)
	}
	v := gen()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process won the race
		b, err := os.ReadFile(path)
		return strings.TrimSpace(string(b)), false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(v + "\n"); err != nil {
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	return v, true, nil
}

// Validate reports every problem with the raw values at once.
func (c *Config) Validate() error {
	var errs []error
	for name, addr := range map[string]string{"GATEHOUSE_ADDR": c.Addr, "GATEHOUSE_ADMIN_ADDR": c.AdminAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not host:port", name, addr))
		}
	}
	if c.MTLSAddr != "" {
		if _, _, err := net.SplitHostPort(c.MTLSAddr); err != nil {
			errs = append(errs, fmt.Errorf("GATEHOUSE_MTLS_ADDR: %q is not host:port", c.MTLSAddr))
		}
		if c.ClientCA == "" {
			errs = append(errs, errors.New("GATEHOUSE_MTLS_ADDR needs GATEHOUSE_CLIENT_CA"))
		}
		if c.TLSCert == "" || c.TLSKey == "" {
			errs = append(errs, errors.New("GATEHOUSE_MTLS_ADDR needs GATEHOUSE_TLS_CERT and GATEHOUSE_TLS_KEY"))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("GATEHOUSE_TLS_CERT and GATEHOUSE_TLS_KEY must be set together"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("GATEHOUSE_DATA_DIR: must not be empty"))
	}
	switch {
	case c.DatabaseURL == "", strings.HasPrefix(c.DatabaseURL, "sqlite:"):
		if c.DatabaseURL == "sqlite:" {
			errs = append(errs, errors.New("GATEHOUSE_DATABASE_URL: sqlite: needs a path"))
		}
	case strings.HasPrefix(c.DatabaseURL, "postgres://"), strings.HasPrefix(c.DatabaseURL, "postgresql://"):
	default:
		errs = append(errs, errors.New("GATEHOUSE_DATABASE_URL: must start with sqlite:, postgres:// or postgresql://"))
	}
	if c.RedisURL != "" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
		errs = append(errs, errors.New("GATEHOUSE_REDIS_URL: must start with redis:// or rediss://"))
	}
	if _, err := ParseVersionDates(c.APIDeprecated); err != nil {
		errs = append(errs, fmt.Errorf("GATEHOUSE_API_DEPRECATED: %w", err))
	}
	if _, err := ParseVersionDates(c.APISunset); err != nil {
		errs = append(errs, fmt.Errorf("GATEHOUSE_API_SUNSET: %w", err))
	}
	if c.JWTTTL < time.Second {
		errs = append(errs, errors.New("GATEHOUSE_JWT_TTL: must be at least 1s"))
	}
	if c.ShutdownDrain < 0 || c.ShutdownDrain > time.Minute {
		errs = append(errs, errors.New("GATEHOUSE_SHUTDOWN_DRAIN: must be between 0s and 1m"))
	}
	if c.RequestTimeout <= 0 || c.RequestTimeout > 10*time.Minute {
		errs = append(errs, errors.New("GATEHOUSE_REQUEST_TIMEOUT: must be positive and at most 10m"))
	}
	if _, err := ParseTrustedProxies(c.TrustedProxiesRaw); err != nil {
		errs = append(errs, fmt.Errorf("GATEHOUSE_TRUSTED_PROXIES: %w", err))
	}
	errs = append(errs, c.validatePayment()...)
	if c.WebhookRetryBase <= 0 {
		errs = append(errs, errors.New("GATEHOUSE_WEBHOOK_RETRY_BASE: must be positive"))
	}
	if c.AuditRetention < 0 || c.AuditRetention > 0 && c.AuditRetention < time.Hour {
		errs = append(errs, errors.New("GATEHOUSE_AUDIT_RETENTION: must be at least 1h, or 0 to keep audit events forever"))
	}
	if c.WebhookPerApp < 1 || c.WebhookPerApp > 1000 {
		errs = append(errs, errors.New("GATEHOUSE_WEBHOOK_PER_APP: must be between 1 and 1000"))
	}
	if c.WebhookRetention < 0 || c.WebhookRetention > 0 && c.WebhookRetention < time.Hour {
		errs = append(errs, errors.New("GATEHOUSE_WEBHOOK_RETENTION: must be at least 1h, or 0 to keep deliveries forever"))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("GATEHOUSE_LOG_FORMAT: %q is not text or json", c.LogFormat))
	}
	if len(c.BootstrapAPIKey) > 256 {
		errs = append(errs, errors.New("GATEHOUSE_BOOTSTRAP_API_KEY: must be at most 256 characters"))
	}
	return errors.Join(errs...)
}

// ParseLevel maps the GATEHOUSE_LOG_LEVEL names to slog levels.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("GATEHOUSE_LOG_LEVEL: %q is not debug, info, warn or error", s)
}

// NewLogger builds the process logger, writing to w in batches (see
// logWriter), and the function that writes out what is still held: call
// it before the process exits.
func (c *Config) NewLogger(w *os.File) (*slog.Logger, func()) {
	lvl, _ := ParseLevel(c.LogLevel)
	lw := newLogWriter(w)
	// slog's JSON or text handler, which writes the request lines itself
	// (see package requestlog).
	return slog.New(requestlog.NewHandler(lw, c.LogFormat == "json", lvl)), lw.Close
}

// ParseTrustedProxies reads a comma-separated list of CIDRs or single
// addresses ("10.0.0.0/8, 127.0.0.1"); empty entries are ignored.
func ParseTrustedProxies(raw string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, f := range strings.Split(raw, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q is neither a CIDR nor an IP address", f))
			continue
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, errors.Join(errs...)
}
