package config

import (
	"errors"
	"net/url"
	"strings"
)

// validatePayment checks the payment provider settings: all three or none.
// Values are never echoed (the key and secret are secrets, and a URL may
// carry credentials).
func (c *Config) validatePayment() []error {
	if c.PaymentURL == "" {
		if c.PaymentAPIKey != "" || c.PaymentSecret != "" {
			return []error{errors.New("GATEHOUSE_PAYMENT_API_KEY and GATEHOUSE_PAYMENT_SECRET need GATEHOUSE_PAYMENT_URL")}
		}
		return nil
	}
	var errs []error
	u, err := url.Parse(c.PaymentURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "":
		errs = append(errs, errors.New("GATEHOUSE_PAYMENT_URL: must be an http:// or https:// URL with a host, e.g. https://pay.example.com/v1"))
	case u.User != nil:
		errs = append(errs, errors.New("GATEHOUSE_PAYMENT_URL: must not carry credentials (use GATEHOUSE_PAYMENT_API_KEY and GATEHOUSE_PAYMENT_SECRET)"))
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(c.PaymentURL, "?"):
		errs = append(errs, errors.New("GATEHOUSE_PAYMENT_URL: must be a base URL without query or fragment (refunds go to <url>/refunds)"))
	}
	switch {
	case c.PaymentAPIKey == "":
		errs = append(errs, errors.New("GATEHOUSE_PAYMENT_API_KEY is required with GATEHOUSE_PAYMENT_URL"))
	case len(c.PaymentAPIKey) > 256 || !headerSafe(c.PaymentAPIKey):
		errs = append(errs, errors.New("GATEHOUSE_PAYMENT_API_KEY: must be at most 256 printable ASCII characters (it is sent as the X-API-Key header)"))
	}
	switch {
	case c.PaymentSecret == "":
		errs = append(errs, errors.New("GATEHOUSE_PAYMENT_SECRET is required with GATEHOUSE_PAYMENT_URL"))
	case len(c.PaymentSecret) > 1024:
		errs = append(errs, errors.New("GATEHOUSE_PAYMENT_SECRET: must be at most 1024 bytes"))
	}
	return errs
}

func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
