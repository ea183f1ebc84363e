package config

import (
	"strings"
	"testing"
)

func TestPaymentSettings(t *testing.T) {
	const secret = "s3cr3t-payment-hmac-key"
	cases := []struct {
		name          string
		url, key, sec string
		want          []string // substrings of the error; none: valid
	}{
		{name: "none"},
		{name: "all three", url: "https://pay.example.com/v1", key: "gk_live_1", sec: secret},
		{name: "loopback http", url: "http://127.0.0.1:9100/", key: "k", sec: secret},
		{name: "key without url", key: "k", want: []string{"need GATEHOUSE_PAYMENT_URL"}},
		{name: "secret without url", sec: secret, want: []string{"need GATEHOUSE_PAYMENT_URL"}},
		{name: "url alone", url: "https://pay.example.com", want: []string{"GATEHOUSE_PAYMENT_API_KEY is required", "GATEHOUSE_PAYMENT_SECRET is required"}},
		{name: "not a url", url: "pay.example.com", key: "k", sec: secret, want: []string{"GATEHOUSE_PAYMENT_URL: must be an http"}},
		{name: "other scheme", url: "ftp://pay.example.com", key: "k", sec: secret, want: []string{"GATEHOUSE_PAYMENT_URL: must be an http"}},
		{name: "credentials", url: "https://user:pw-in-url@pay.example.com", key: "k", sec: secret, want: []string{"must not carry credentials"}},
		{name: "query", url: "https://pay.example.com/?x=1", key: "k", sec: secret, want: []string{"without query"}},
		{name: "key with a space", url: "https://pay.example.com", key: "a b", sec: secret, want: []string{"GATEHOUSE_PAYMENT_API_KEY: must be"}},
		{name: "key with a newline", url: "https://pay.example.com", key: "a\r\nX-Evil: 1", sec: secret, want: []string{"GATEHOUSE_PAYMENT_API_KEY: must be"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Defaults()
			cfg.Payments.URL, cfg.Payments.APIKey, cfg.Payments.Secret = c.url, c.key, c.sec
			err := cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("valid settings refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// Values are never echoed: neither the secret nor a URL's password.
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "pw-in-url") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

// The payment settings' problems are reported with every other problem.
func TestPaymentProblemsReportedWithTheOthers(t *testing.T) {
	cfg := Defaults()
	cfg.Server.Addr = "nope"
	cfg.Payments.URL = "https://pay.example.com"
	err := cfg.Validate()
	for _, w := range []string{"GATEHOUSE_ADDR", "GATEHOUSE_PAYMENT_API_KEY", "GATEHOUSE_PAYMENT_SECRET"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %s: %v", w, err)
		}
	}
}
