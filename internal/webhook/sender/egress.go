package sender

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/outbound"
	"gatehouse/internal/redact"
	"gatehouse/internal/secret"
)

// What leaves for a receiver besides the message: an endpoint's custom
// request headers and its client certificate (mutual TLS). The proxy
// every attempt may go through is in proxy.go.

// Limits of an endpoint's custom headers.
const (
	MaxCustomHeaders     = 20
	MaxHeaderNameLen     = 64
	MaxHeaderValueLen    = 1024
	maxClientCertPEMSize = 32 << 10
)

// header is one custom request header of an endpoint.
type Header struct{ Name, Value string }

// reservedHeaders are the headers an endpoint may not set, with why:
// gatehouse's own (the signature, the trace context, the body's type and
// length), and those of the connection rather than the request
// (hop-by-hop, Host), which the HTTP client owns.
var reservedHeaders = map[string]string{
	"host":                "the HTTP client sets it from the URL",
	"content-length":      "the HTTP client sets it from the body",
	"content-type":        "the message is always application/json",
	"content-encoding":    "the message is sent as it is",
	"transfer-encoding":   "a hop-by-hop header the HTTP client owns",
	"connection":          "a hop-by-hop header the HTTP client owns",
	"keep-alive":          "a hop-by-hop header the HTTP client owns",
	"proxy-connection":    "a hop-by-hop header the HTTP client owns",
	"proxy-authenticate":  "a hop-by-hop header the HTTP client owns",
	"proxy-authorization": "a hop-by-hop header (the proxy's credentials go in GATEHOUSE_WEBHOOK_PROXY)",
	"te":                  "a hop-by-hop header the HTTP client owns",
	"trailer":             "a hop-by-hop header the HTTP client owns",
	"upgrade":             "a hop-by-hop header the HTTP client owns",
	"expect":              "the HTTP client owns it",
	"traceparent":         "gatehouse sends a fresh trace context",
	"tracestate":          "gatehouse sends a fresh trace context",
}

// reservedHeader says why name may not be a custom header ("" if it may).
func reservedHeader(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasPrefix(n, "webhook-"), strings.HasPrefix(n, "svix-"), strings.Contains(n, "signature"):
		return "gatehouse signs every delivery with the webhook-id, webhook-timestamp, webhook-signature and X-Webhook-Signature headers, " +
			"and receivers verify them; no custom header may be named like them (webhook-*, svix-*, or containing \"signature\")"
	}
	return reservedHeaders[n]
}

// ParseHeaders reads custom headers given as a JSON object of name →
// string value (the admin API's headers), and checks them (CheckHeaders).
func ParseHeaders(raw []byte) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errs.Invalid("headers", "must be a JSON object of header name → string value, e.g. {\"Authorization\": \"Bearer …\"}")
	}
	if _, err := CheckHeaders(m); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckHeaders checks an endpoint's custom headers and returns them in
// name order: at most MaxCustomHeaders, each name an HTTP token of at most
// MaxHeaderNameLen characters that is not reserved (see reservedHeader)
// nor given twice (in any case), each value printable ASCII of at most
// MaxHeaderValueLen characters. Values are never echoed in errors: they
// are often credentials.
func CheckHeaders(m map[string]string) ([]Header, error) {
	if len(m) > MaxCustomHeaders {
		return nil, errs.Invalid("headers", "has %d headers: at most %d", len(m), MaxCustomHeaders)
	}
	out := make([]Header, 0, len(m))
	seen := map[string]bool{}
	for name, value := range m {
		switch {
		case name == "" || len(name) > MaxHeaderNameLen || !isToken(name):
			return nil, errs.Invalid("headers", "%s is not a header name (1-%d of letters, digits and !#$%%&'*+-.^_`|~)", redact.Echo(name), MaxHeaderNameLen)
		case reservedHeader(name) != "":
			return nil, errs.Invalid("headers", "%s cannot be set: %s", redact.Echo(name), reservedHeader(name))
		case seen[strings.ToLower(name)]:
			return nil, errs.Invalid("headers", "%s is given twice (header names are case-insensitive)", redact.Echo(name))
		case len(value) > MaxHeaderValueLen:
			return nil, errs.Invalid("headers", "the value of %s is longer than %d characters", redact.Echo(name), MaxHeaderValueLen)
		case !isHeaderText(value):
			return nil, errs.Invalid("headers", "the value of %s must be printable ASCII (no control characters, no line breaks)", redact.Echo(name))
		}
		seen[strings.ToLower(name)] = true
		out = append(out, Header{Name: http.CanonicalHeaderKey(name), Value: value})
	}
	slices.SortFunc(out, func(a, b Header) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// isToken reports whether s is an HTTP token (RFC 9110 section 5.6.2).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// isHeaderText reports whether s is printable ASCII (spaces and tabs
// inside allowed).
func isHeaderText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

// SealHeaders seals custom headers (as a JSON object) for storage; nil
// for none.
func SealHeaders(sealer *secret.Sealer, hs []Header) ([]byte, error) {
	if len(hs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[h.Name] = h.Value
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return sealer.Seal(b)
}

// OpenHeaders unseals an endpoint's stored custom headers.
func OpenHeaders(sealer *secret.Sealer, sealed []byte) ([]Header, error) {
	if len(sealed) == 0 {
		return nil, nil
	}
	b, err := sealer.Open(sealed)
	if err != nil {
		return nil, errors.New("the endpoint's custom headers cannot be unsealed with this master key (set them again)")
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("the endpoint's stored custom headers are not readable (set them again)")
	}
	return CheckHeaders(m)
}

// setHeaders adds the custom headers to req (before gatehouse's own,
// which no custom header can name).
func setHeaders(req *http.Request, hs []Header) {
	for _, h := range hs {
		req.Header.Set(h.Name, h.Value)
	}
}

// RedactHeaders blanks the custom headers' values in h, the copy of a
// request's headers that is stored with the attempt (and shown to
// operators): they are often credentials.
func RedactHeaders(h http.Header, hs []Header) {
	for _, c := range hs {
		if h.Get(c.Name) != "" {
			h.Set(c.Name, "[redacted]")
		}
	}
}

// CheckClientCertificate checks an endpoint's client certificate: certPEM
// one or more PEM CERTIFICATE blocks (the leaf first), keyPEM the leaf's
// unencrypted private key in PEM (PKCS #1, PKCS #8 or SEC 1), the two a
// pair, the leaf valid at now. Errors name the field at fault and never
// show the key.
func CheckClientCertificate(certPEM, keyPEM string, now time.Time) (tls.Certificate, error) {
	var none tls.Certificate
	if len(certPEM) > maxClientCertPEMSize {
		return none, errs.Invalid("clientCertificate", "is larger than %d KiB", maxClientCertPEMSize>>10)
	}
	if len(keyPEM) > maxClientCertPEMSize {
		return none, errs.Invalid("clientKey", "is larger than %d KiB", maxClientCertPEMSize>>10)
	}
	var leaf *x509.Certificate
	rest := []byte(certPEM)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return none, errs.Invalid("clientCertificate", "holds a PEM block of type %q: only CERTIFICATE blocks (the client certificate first, then its intermediates)", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return none, errs.Invalid("clientCertificate", "holds a certificate that cannot be read: %v", err)
		}
		if leaf == nil {
			leaf = c
		}
	}
	if leaf == nil {
		return none, errs.Invalid("clientCertificate", "is not a PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	if !now.Before(leaf.NotAfter) {
		return none, errs.Invalid("clientCertificate", "expired on %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	kb, _ := pem.Decode([]byte(keyPEM))
	if kb == nil || !strings.HasSuffix(kb.Type, "PRIVATE KEY") {
		return none, errs.Invalid("clientKey", "is not a PEM private key (-----BEGIN PRIVATE KEY-----)")
	}
	if strings.Contains(kb.Headers["Proc-Type"], "ENCRYPTED") || kb.Type == "ENCRYPTED PRIVATE KEY" {
		return none, errs.Invalid("clientKey", "is encrypted: give the key without a passphrase (it is sealed at rest with the master key)")
	}
	cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return none, errs.Invalid("clientKey", "does not match the certificate's public key")
		}
		return none, errs.Invalid("clientKey", "cannot be read as a PKCS #1, PKCS #8 or SEC 1 private key for the certificate")
	}
	return cert, nil
}

// OpenClientCert unseals an endpoint's client key and pairs it with its
// certificate for attempts.
func OpenClientCert(sealer *secret.Sealer, certPEM string, sealedKey []byte) (*outbound.ClientCert, error) {
	key, err := sealer.Open(sealedKey)
	if err != nil {
		return nil, errors.New("the endpoint's client key cannot be unsealed with this master key (set the client certificate again)")
	}
	cert, err := tls.X509KeyPair([]byte(certPEM), key)
	if err != nil {
		return nil, fmt.Errorf("the endpoint's client certificate and key are not a pair (set them again)")
	}
	return outbound.NewClientCert(cert), nil
}
