package config

import (
	"errors"
	"time"

	"gatehouse/internal/secret"
)

// Auth is the process's keys and the lifetime of what it signs. The keys
// are decoded into Config.MasterKey and Config.JWTSecret by Resolve (and
// generated into the data dir in embedded mode when absent).
type Auth struct {
	MasterKeyB64    string        `flag:"master-key" empty:"dev: generated into the data dir" usage:"base64 of 32 bytes: AES-256-GCM key for stored secrets" doc:"base64 of 32 bytes; AES-256-GCM key for stored secrets (required with Postgres)"`
	JWTSecretRaw    string        `flag:"jwt-secret" empty:"dev: generated into the data dir" usage:"HS256 key: the value's bytes as written (base64 text is not decoded), at least 32" doc:"HS256 key: the value's bytes as written, never decoded (base64 text is used as text), at least 32 bytes (required with Postgres); see docs/auth.md"`
	JWTTTL          time.Duration `flag:"jwt-ttl" default:"2h" usage:"lifetime of signed user tokens (login)" doc:"lifetime of signed user tokens (at least 1s)"`
	BootstrapAPIKey string        `flag:"bootstrap-api-key" usage:"an enabled admin API key with this value exists after start" doc:"an enabled admin API key with exactly this value exists after start"`
}

// Validate checks the keys' form and the token lifetime; errors never
// show a key.
func (a *Auth) Validate() error {
	var errs []error
	if a.MasterKeyB64 != "" {
		if _, err := secret.ParseKey(a.MasterKeyB64); err != nil {
			errs = append(errs, invalidf(a, &a.MasterKeyB64, "%w", err))
		}
	}
	if a.JWTSecretRaw != "" && len(a.JWTSecretRaw) < 32 {
		errs = append(errs, invalidf(a, &a.JWTSecretRaw, "must be at least 32 bytes"))
	}
	if a.JWTTTL < time.Second {
		errs = append(errs, invalidf(a, &a.JWTTTL, "must be at least 1s"))
	}
	if len(a.BootstrapAPIKey) > 256 {
		errs = append(errs, invalidf(a, &a.BootstrapAPIKey, "must be at most 256 characters"))
	}
	return errors.Join(errs...)
}
