package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Payments is the payment provider refunds go to. Without a URL there is
// none, and refundOrder answers PAYMENT_NOT_CONFIGURED.
type Payments struct {
	// URL is the provider's base URL (refunds go to URL/refunds); loopback
	// addresses are allowed.
	URL string `flag:"payment-url" usage:"payment provider base URL (refunds go to <url>/refunds); empty: refunds are not configured" doc:"payment provider base URL (refunds go to <url>/refunds; loopback allowed); empty: refundOrder answers PAYMENT_NOT_CONFIGURED"`
	// APIKey (X-API-Key) and Secret (the HMAC key of X-Signature) identify
	// gatehouse to the provider. Never logged.
	APIKey string `flag:"payment-api-key" usage:"API key sent to the payment provider as X-API-Key" doc:"sent to the provider as X-API-Key; required with the URL, never logged"`
	Secret string `flag:"payment-secret" usage:"HMAC-SHA256 key of the payment provider's X-Signature (prefer the environment variable: flags show in ps)" doc:"the HMAC-SHA256 key of the provider's X-Signature; required with the URL, never logged"`
}

// Validate checks the payment provider settings: all three or none.
// Values are never echoed (the key and secret are secrets, and a URL may
// carry credentials).
func (c *Payments) Validate() error {
	if c.URL == "" {
		if c.APIKey != "" || c.Secret != "" {
			return fmt.Errorf("%s and %s need %s", envOf(c, &c.APIKey), envOf(c, &c.Secret), envOf(c, &c.URL))
		}
		return nil
	}
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "":
		errs = append(errs, invalidf(c, &c.URL, "must be an http:// or https:// URL with a host, e.g. https://pay.example.com/v1"))
	case u.User != nil:
		errs = append(errs, invalidf(c, &c.URL, "must not carry credentials (use %s and %s)", envOf(c, &c.APIKey), envOf(c, &c.Secret)))
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(c.URL, "?"):
		errs = append(errs, invalidf(c, &c.URL, "must be a base URL without query or fragment (refunds go to <url>/refunds)"))
	}
	switch {
	case c.APIKey == "":
		errs = append(errs, fmt.Errorf("%s is required with %s", envOf(c, &c.APIKey), envOf(c, &c.URL)))
	case len(c.APIKey) > 256 || !headerSafe(c.APIKey):
		errs = append(errs, invalidf(c, &c.APIKey, "must be at most 256 printable ASCII characters (it is sent as the X-API-Key header)"))
	}
	switch {
	case c.Secret == "":
		errs = append(errs, fmt.Errorf("%s is required with %s", envOf(c, &c.Secret), envOf(c, &c.URL)))
	case len(c.Secret) > 1024:
		errs = append(errs, invalidf(c, &c.Secret, "must be at most 1024 bytes"))
	}
	return errors.Join(errs...)
}

func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
