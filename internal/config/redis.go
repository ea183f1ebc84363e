package config

import (
	"errors"
	"strings"
)

// Redis is the key-value store shared by the replicas; without a URL the
// store is in-process (one replica only).
type Redis struct {
	URL string `flag:"redis-url" empty:"empty = in-process store" usage:"redis://… (default: in-process store, one replica only)" doc:"redis://…: nonces, rate limits, deny-list, sessions; its maxmemory-policy must be noeviction"`
	// KeyPrefix starts every Redis key, so deployments (and tests) can
	// share one Redis server.
	KeyPrefix     string `flag:"redis-prefix" default:"gatehouse:" usage:"prefix of every Redis key" doc:"prefix of every Redis key (share one Redis between deployments)"`
	AllowEviction bool   `flag:"redis-allow-eviction" usage:"start even if Redis' maxmemory-policy may evict keys (nonces, deny-list)" doc:"start even though Redis' maxmemory-policy is not noeviction (logged as a WARN); otherwise such a Redis is refused at start"`
}

// Validate checks the URL's scheme.
func (r *Redis) Validate() error {
	if r.URL != "" && !strings.HasPrefix(r.URL, "redis://") && !strings.HasPrefix(r.URL, "rediss://") {
		return errors.New("GATEHOUSE_REDIS_URL: must start with redis:// or rediss://")
	}
	return nil
}
