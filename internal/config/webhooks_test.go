package config

import (
	"strings"
	"testing"
)

// TestWebhookProxySetting: GATEHOUSE_WEBHOOK_PROXY must be an http(s) URL
// of a proxy's address; a bad one is refused naming the variable, never
// echoing the URL (it may hold the proxy's password).
func TestWebhookProxySetting(t *testing.T) {
	for _, c := range []struct {
		proxy string
		ok    bool
	}{
		{"", true},
		{"http://127.0.0.1:4750", true},
		{"https://user:hunter2@proxy.internal", true},
		{"socks5://user:hunter2@proxy.internal:1080", false},
		{"http://user:hunter2@proxy.internal:4750/path", false},
		{"http://user:hunter2@:4750", false},
		{"http://user:hunter2@proxy.internal:99999", false},
	} {
		w := Defaults().Webhooks
		w.Proxy = c.proxy
		err := w.Validate()
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.proxy, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "GATEHOUSE_WEBHOOK_PROXY")):
			t.Errorf("%s: %v, want an error naming GATEHOUSE_WEBHOOK_PROXY", c.proxy, err)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("%s: the error shows the password: %v", c.proxy, err)
		}
	}
}
