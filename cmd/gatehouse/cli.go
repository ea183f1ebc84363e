package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/config"
)

// run builds the command tree and runs it. Every setting is a flag with a
// GATEHOUSE_* environment variable behind it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	d := config.Defaults()
	root := &cli.Command{
		Name:      "gatehouse",
		Usage:     "the gateway between the company and partners, users and staff",
		Writer:    stdout,
		ErrWriter: stderr,
		Reader:    stdin,
		Flags:     settingFlags(d),
		Commands: []*cli.Command{
			serveCommand(),
			migrateCommand(),
			versionCommand(),
			signCommand(),
			webhookCommand(),
			apikeyCommand(),
			userCommand(),
		},
	}
	return root.Run(ctx, args)
}

// settingFlags are the settings of the service: each a flag of the root
// command with a GATEHOUSE_* environment variable behind it, defaults d
// (the README's settings table lists them).
func settingFlags(d config.Config) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "addr", Value: d.Addr, Usage: "public listener", Sources: cli.EnvVars("GATEHOUSE_ADDR")},
		&cli.StringFlag{Name: "admin-addr", Value: d.AdminAddr, Usage: "admin listener (GraphQL, Playground, /metrics)", Sources: cli.EnvVars("GATEHOUSE_ADMIN_ADDR")},
		&cli.StringFlag{Name: "data-dir", Value: d.DataDir, Usage: "embedded database and generated dev keys", Sources: cli.EnvVars("GATEHOUSE_DATA_DIR")},
		&cli.StringFlag{Name: "database-url", Usage: "sqlite:PATH or postgres://… (default sqlite:<data dir>/gatehouse.db)", Sources: cli.EnvVars("GATEHOUSE_DATABASE_URL")},
		&cli.StringFlag{Name: "redis-url", Usage: "redis://… (default: in-process store, one replica only)", Sources: cli.EnvVars("GATEHOUSE_REDIS_URL")},
		&cli.StringFlag{Name: "redis-prefix", Value: d.RedisKeyPrefix, Usage: "prefix of every Redis key", Sources: cli.EnvVars("GATEHOUSE_REDIS_PREFIX")},
		&cli.StringFlag{Name: "master-key", Usage: "base64 of 32 bytes: AES-256-GCM key for stored secrets", Sources: cli.EnvVars("GATEHOUSE_MASTER_KEY")},
		&cli.StringFlag{Name: "jwt-secret", Usage: "HS256 key, at least 32 bytes", Sources: cli.EnvVars("GATEHOUSE_JWT_SECRET")},
		&cli.DurationFlag{Name: "jwt-ttl", Value: d.JWTTTL, Usage: "lifetime of signed user tokens (login)", Sources: cli.EnvVars("GATEHOUSE_JWT_TTL")},
		&cli.StringFlag{Name: "bootstrap-api-key", Usage: "an enabled admin API key with this value exists after start", Sources: cli.EnvVars("GATEHOUSE_BOOTSTRAP_API_KEY")},
		&cli.StringFlag{Name: "tls-cert", Usage: "certificate file: the public and admin listeners speak HTTPS", Sources: cli.EnvVars("GATEHOUSE_TLS_CERT")},
		&cli.StringFlag{Name: "tls-key", Usage: "key file for --tls-cert", Sources: cli.EnvVars("GATEHOUSE_TLS_KEY")},
		&cli.StringFlag{Name: "mtls-addr", Usage: "extra HTTPS listener requiring a client certificate", Sources: cli.EnvVars("GATEHOUSE_MTLS_ADDR")},
		&cli.StringFlag{Name: "client-ca", Usage: "CA bundle that signs accepted client certificates", Sources: cli.EnvVars("GATEHOUSE_CLIENT_CA")},
		&cli.StringFlag{Name: "trusted-proxies", Usage: "comma-separated CIDRs of reverse proxies whose X-Forwarded-For/-Proto are believed", Sources: cli.EnvVars("GATEHOUSE_TRUSTED_PROXIES")},
		&cli.DurationFlag{Name: "request-timeout", Value: d.RequestTimeout, Usage: "deadline of each request's database and Redis work (then 503)", Sources: cli.EnvVars("GATEHOUSE_REQUEST_TIMEOUT")},
		&cli.BoolFlag{Name: "redis-allow-eviction", Usage: "start even if Redis' maxmemory-policy may evict keys (nonces, deny-list)", Sources: cli.EnvVars("GATEHOUSE_REDIS_ALLOW_EVICTION")},
		&cli.DurationFlag{Name: "webhook-retry-base", Value: d.WebhookRetryBase, Usage: "first webhook retry delay; later ones double", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_RETRY_BASE")},
		&cli.DurationFlag{Name: "shutdown-drain", Usage: "after SIGTERM, answer /readyz with 503 this long before closing the listeners", Sources: cli.EnvVars("GATEHOUSE_SHUTDOWN_DRAIN")},
		&cli.DurationFlag{Name: "audit-retention", Value: d.AuditRetention, Usage: "keep admin audit events this long (0: forever)", Sources: cli.EnvVars("GATEHOUSE_AUDIT_RETENTION")},
		&cli.IntFlag{Name: "webhook-per-app", Value: d.WebhookPerApp, Usage: "webhook attempts of one app in flight at once, over all replicas", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_PER_APP")},
		&cli.DurationFlag{Name: "webhook-retention", Value: d.WebhookRetention, Usage: "keep final webhook deliveries and their attempts this long (0: forever)", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_RETENTION")},
		&cli.BoolFlag{Name: "webhook-allow-private", Usage: "allow callback URLs on loopback/private/link-local addresses", Sources: cli.EnvVars("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE")},
		&cli.StringFlag{Name: "payment-url", Usage: "payment provider base URL (refunds go to <url>/refunds); empty: refunds are not configured", Sources: cli.EnvVars("GATEHOUSE_PAYMENT_URL")},
		&cli.StringFlag{Name: "payment-api-key", Usage: "API key sent to the payment provider as X-API-Key", Sources: cli.EnvVars("GATEHOUSE_PAYMENT_API_KEY")},
		&cli.StringFlag{Name: "payment-secret", Usage: "HMAC-SHA256 key of the payment provider's X-Signature (prefer the environment variable: flags show in ps)", Sources: cli.EnvVars("GATEHOUSE_PAYMENT_SECRET")},
		&cli.StringFlag{Name: "api-deprecated", Usage: "partner API versions announced as deprecated: v1=2026-06-30,… (Deprecation header)", Sources: cli.EnvVars("GATEHOUSE_API_DEPRECATED")},
		&cli.StringFlag{Name: "api-sunset", Usage: "retirement dates of partner API versions: v1=2026-12-31,… (Sunset header)", Sources: cli.EnvVars("GATEHOUSE_API_SUNSET")},
		&cli.StringFlag{Name: "log-level", Value: d.LogLevel, Usage: "debug, info, warn or error", Sources: cli.EnvVars("GATEHOUSE_LOG_LEVEL")},
		&cli.StringFlag{Name: "log-format", Value: d.LogFormat, Usage: "text or json", Sources: cli.EnvVars("GATEHOUSE_LOG_FORMAT")},
	}
}

// configFrom reads the flags into a resolved, validated Config.
func configFrom(cmd *cli.Command) (config.Config, error) {
	c := config.Config{
		Addr:                cmd.String("addr"),
		AdminAddr:           cmd.String("admin-addr"),
		DataDir:             cmd.String("data-dir"),
		DatabaseURL:         cmd.String("database-url"),
		RedisURL:            cmd.String("redis-url"),
		RedisKeyPrefix:      cmd.String("redis-prefix"),
		MasterKeyB64:        cmd.String("master-key"),
		JWTSecretRaw:        cmd.String("jwt-secret"),
		JWTTTL:              cmd.Duration("jwt-ttl"),
		BootstrapAPIKey:     cmd.String("bootstrap-api-key"),
		TLSCert:             cmd.String("tls-cert"),
		TLSKey:              cmd.String("tls-key"),
		MTLSAddr:            cmd.String("mtls-addr"),
		ClientCA:            cmd.String("client-ca"),
		TrustedProxiesRaw:   cmd.String("trusted-proxies"),
		RequestTimeout:      cmd.Duration("request-timeout"),
		RedisAllowEviction:  cmd.Bool("redis-allow-eviction"),
		WebhookRetryBase:    cmd.Duration("webhook-retry-base"),
		WebhookAllowPrivate: cmd.Bool("webhook-allow-private"),
		PaymentURL:          cmd.String("payment-url"),
		PaymentAPIKey:       cmd.String("payment-api-key"),
		PaymentSecret:       cmd.String("payment-secret"),
		AuditRetention:      cmd.Duration("audit-retention"),
		WebhookPerApp:       cmd.Int("webhook-per-app"),
		WebhookRetention:    cmd.Duration("webhook-retention"),
		ShutdownDrain:       cmd.Duration("shutdown-drain"),
		APIDeprecated:       cmd.String("api-deprecated"),
		APISunset:           cmd.String("api-sunset"),
		LogLevel:            cmd.String("log-level"),
		LogFormat:           cmd.String("log-format"),
	}
	err := c.Resolve()
	return c, err
}
