package telemetry_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"gatehouse/internal/telemetry"
)

// TestClientAttrs: a client span names the host alone in server.address,
// the port (the scheme's default when the URL has none) in server.port,
// and a url.full that keeps no userinfo, query, fragment or path.
func TestClientAttrs(t *testing.T) {
	for _, c := range []struct {
		url                string
		host, full         string
		port               int64
		wantNoAddr, noFull bool
	}{
		{url: "https://user:pw@partner.example:8443/hooks/T0K3N?token=s3cret#frag", host: "partner.example", port: 8443, full: "https://partner.example:8443/REDACTED"},
		{url: "http://partner.example?sig=abc", host: "partner.example", port: 80, full: "http://partner.example"},
		{url: "https://[::1]/", host: "::1", port: 443, full: "https://[::1]"},
		{url: "::not a url", wantNoAddr: true, noFull: true},
	} {
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range telemetry.ClientAttrs("POST", c.url) {
			got[kv.Key] = kv.Value
		}
		if got["http.request.method"].AsString() != "POST" {
			t.Errorf("%s: http.request.method = %q", c.url, got["http.request.method"].AsString())
		}
		if c.wantNoAddr {
			if _, ok := got["server.address"]; ok {
				t.Errorf("%s: server.address %q for a URL that does not parse", c.url, got["server.address"].AsString())
			}
		} else if a, p := got["server.address"].AsString(), got["server.port"].AsInt64(); a != c.host || p != c.port {
			t.Errorf("%s: server.address %q server.port %d, want %q %d", c.url, a, p, c.host, c.port)
		}
		if f, ok := got["url.full"]; c.noFull == ok || f.AsString() != c.full {
			t.Errorf("%s: url.full %q, want %q", c.url, f.AsString(), c.full)
		}
	}
}
