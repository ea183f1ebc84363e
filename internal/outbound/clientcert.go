package outbound

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net/http"
)

// ClientCert is a TLS client certificate a call presents when the host
// asks for one (mutual TLS).
//
// Calls with a certificate go through a transport of their own per
// certificate: a pooled connection was authenticated with the
// certificate of the call that opened it, so sharing one pool would let a
// connection opened with one caller's certificate carry another caller's
// request (or one made without any). The transports share the Client's
// connection caps, breakers and timeouts.
type ClientCert struct {
	Cert tls.Certificate
	id   string
}

// NewClientCert wraps cert (a parsed certificate chain with its private
// key, as tls.X509KeyPair returns) for CallOptions.ClientCert.
func NewClientCert(cert tls.Certificate) *ClientCert {
	h := sha256.New()
	for _, der := range cert.Certificate {
		h.Write(der)
	}
	return &ClientCert{Cert: cert, id: hex.EncodeToString(h.Sum(nil))}
}

// maxCertTransports bounds the transports kept for client certificates;
// past it they are all dropped (their idle connections closed) and made
// again as calls need them.
const maxCertTransports = 1000

// httpFor returns the HTTP client of a call presenting cc (nil: the
// shared one).
func (c *Client) httpFor(cc *ClientCert) *http.Client {
	if cc == nil {
		return c.http
	}
	c.certMu.Lock()
	defer c.certMu.Unlock()
	if hc, ok := c.certHTTP[cc.id]; ok {
		return hc
	}
	if len(c.certHTTP) >= maxCertTransports {
		for _, hc := range c.certHTTP {
			hc.CloseIdleConnections()
		}
		clear(c.certHTTP)
	}
	tr := newTransport(c.cfg, c.dial)
	cert := cc.Cert
	// GetClientCertificate rather than Certificates: the certificate is
	// sent whatever CA names the host's request lists (Certificates would
	// send nothing when none matches, and the host would see no
	// certificate at all).
	tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &cert, nil
	}
	hc := &http.Client{Transport: tr, CheckRedirect: c.http.CheckRedirect}
	c.certHTTP[cc.id] = hc
	return hc
}

// closeIdle closes the idle connections of every transport.
func (c *Client) closeIdle() {
	c.transport.CloseIdleConnections()
	c.certMu.Lock()
	defer c.certMu.Unlock()
	for _, hc := range c.certHTTP {
		hc.CloseIdleConnections()
	}
}
