package config

import (
	"errors"
	"time"

	"gatehouse/internal/outbound"
)

// Webhooks is how deliveries are retried, paced and kept.
type Webhooks struct {
	RetryBase    time.Duration `flag:"webhook-retry-base" default:"1s" usage:"first webhook retry delay; later ones double"`
	AllowPrivate bool          `flag:"webhook-allow-private" usage:"allow callback URLs on loopback/private/link-local addresses"`
	PerApp       int           `flag:"webhook-per-app" default:"4" usage:"webhook attempts of one app in flight at once, over all replicas" doc:"webhook attempts of one app in flight at once, over all replicas (1–1000)"`
	Retention    time.Duration `flag:"webhook-retention" default:"720h" usage:"keep final webhook deliveries and their attempts this long (0: forever)" doc:"deliveries in a final state (SUCCESS, FAILED, CANCELLED) and their attempts are deleted this long after their last change; 0 keeps them"`
	// Proxy may hold the proxy's password: it is never echoed.
	Proxy string `flag:"webhook-proxy" usage:"HTTP CONNECT proxy every webhook attempt goes through (static egress IPs), http://[user:password@]host:port; empty: direct" doc:"HTTP CONNECT proxy every webhook attempt goes through, for static egress IPs (e.g. Stripe's smokescreen): http://host:port or https://host:port, with user:password@ for Basic proxy authentication. The URL guard still checks each target, which the proxy is asked for by its checked IP address; the proxy itself may be on loopback or a private network. Empty: attempts connect directly (see docs/webhooks.md)"`
}

// Validate checks the retry base, the per-app cap, the retention and the
// proxy URL (whose text is never echoed: it may hold a password).
func (w *Webhooks) Validate() error {
	var errs []error
	if w.RetryBase <= 0 {
		errs = append(errs, invalidf(w, &w.RetryBase, "must be positive"))
	}
	if w.PerApp < 1 || w.PerApp > 1000 {
		errs = append(errs, invalidf(w, &w.PerApp, "must be between 1 and 1000"))
	}
	if w.Retention < 0 || w.Retention > 0 && w.Retention < time.Hour {
		errs = append(errs, invalidf(w, &w.Retention, "must be at least 1h, or 0 to keep deliveries forever"))
	}
	if w.Proxy != "" {
		if _, err := outbound.ParseProxyURL(w.Proxy); err != nil {
			errs = append(errs, invalidf(w, &w.Proxy, "%w", err))
		}
	}
	return errors.Join(errs...)
}
