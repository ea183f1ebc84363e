package config

import (
	"errors"
	"strings"

	"gatehouse/internal/kv"
)

// Redis is the key-value store shared by the replicas; without a URL the
// store is in-process (one replica only).
type Redis struct {
	URL string `flag:"redis-url" empty:"empty = in-process store" usage:"redis://, rediss://, redis+cluster://, redis+sentinel://… (default: in-process store, one replica only)" doc:"redis://, rediss://, redis+cluster:// or redis+sentinel:// (see [deploy](deploy.md#redis-topologies)): nonces, rate limits, deny-list, sessions; its maxmemory-policy must be noeviction"`
	// KeyPrefix starts every Redis key, so deployments (and tests) can
	// share one Redis server.
	KeyPrefix     string `flag:"redis-prefix" default:"gatehouse:" usage:"prefix of every Redis key" doc:"prefix of every Redis key (share one Redis between deployments)"`
	AllowEviction bool   `flag:"redis-allow-eviction" usage:"start even if Redis' maxmemory-policy may evict keys (nonces, deny-list)" doc:"start even though Redis' maxmemory-policy is not noeviction (logged as a WARN); otherwise such a Redis is refused at start"`
	// CA is a PEM bundle of the CA(s) that sign the Redis servers'
	// certificates (TLS URLs with a private CA).
	CA string `flag:"redis-ca" empty:"empty = system roots" usage:"PEM bundle of the CA that signs the Redis servers' certificates (TLS URLs)" doc:"PEM bundle of the private CA that signs the Redis servers' certificates (rediss://, rediss+cluster://, rediss+sentinel://)"`
	// NonceMemoryMax bounds the in-process replay memory.
	NonceMemoryMax int `flag:"nonce-memory-max" default:"3355443" usage:"nonces the in-process replay memory holds at most; when full, signed requests get 503" doc:"nonces the in-process replay memory holds (default: 128 MiB at 40 bytes each); when full, new signed requests get 503/6000 until nonces expire"`
}

// Validate checks the URL's scheme, that a CA goes with a URL, and the
// replay memory's bound.
func (r *Redis) Validate() error {
	var errs []error
	if r.URL != "" && !kv.IsRedisURL(r.URL) {
		errs = append(errs, invalidf(r, &r.URL, "must start with one of %s://", strings.Join(kv.RedisSchemes, "://, ")))
	}
	if r.CA != "" && r.URL == "" {
		errs = append(errs, invalidf(r, &r.CA, "set without %s", envOf(r, &r.URL)))
	}
	if r.NonceMemoryMax < 1 {
		errs = append(errs, invalidf(r, &r.NonceMemoryMax, "must be at least 1"))
	}
	return errors.Join(errs...)
}
