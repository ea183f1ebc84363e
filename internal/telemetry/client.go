package telemetry

import (
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// Redacted stands in url.full for a part of a URL that may hold a
// credential (the semantic conventions' word for it).
const Redacted = "REDACTED"

// ClientAttrs are the semantic-convention attributes of the client span
// of an HTTP call (method) to rawURL: http.request.method, server.address
// (the host alone), server.port (the scheme's default when the URL names
// none) and url.full without the userinfo, the query and the fragment,
// and with the path replaced by REDACTED: each can carry a credential (a
// receiver's URL path is often its secret, as a chat webhook's token is;
// a provider's, its account). A URL that does not parse gives the method
// alone.
func ClientAttrs(method, rawURL string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("http.request.method", method)}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return attrs
	}
	attrs = append(attrs, ServerAttrs(u.Scheme, u.Host)...)
	full := url.URL{Scheme: u.Scheme, Host: u.Host}
	if strings.Trim(u.EscapedPath(), "/") != "" {
		full.Path = "/" + Redacted
	}
	return append(attrs, attribute.String("url.full", full.String()))
}

// ServerAttrs are server.address (the host alone, without an IPv6
// literal's brackets) and server.port (the scheme's default when hostport
// names none) of hostport, a URL's host or a Host header; each left out
// when unknown.
func ServerAttrs(scheme, hostport string) []attribute.KeyValue {
	u := url.URL{Scheme: scheme, Host: hostport}
	var attrs []attribute.KeyValue
	if host := u.Hostname(); host != "" {
		attrs = append(attrs, attribute.String("server.address", host))
	}
	if port := urlPort(&u); port > 0 {
		attrs = append(attrs, attribute.Int("server.port", port))
	}
	return attrs
}

// urlPort is u's port, or its scheme's default; 0 when neither is known.
func urlPort(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return 0
		}
		return n
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}
