package config

import (
	"errors"
	"fmt"
	"net"
)

// TLS is HTTPS on the listeners and the mutual-TLS listener.
type TLS struct {
	Cert     string `flag:"tls-cert" usage:"certificate file: the public and admin listeners speak HTTPS" doc:"certificate file (PEM): both listeners (public and admin) speak HTTPS; HTTPS responses carry Strict-Transport-Security: max-age=31536000"`
	Key      string `flag:"tls-key" usage:"key file for --tls-cert" doc:"key file of GATEHOUSE_TLS_CERT (both or neither)"`
	MTLSAddr string `flag:"mtls-addr" usage:"extra HTTPS listener requiring a client certificate" doc:"extra HTTPS listener requiring a client certificate signed by GATEHOUSE_CLIENT_CA (needs the TLS certificate and key)"`
	ClientCA string `flag:"client-ca" usage:"CA bundle that signs accepted client certificates" doc:"CA bundle (PEM) that signs the client certificates the mutual-TLS listener accepts"`
}

// Validate checks that certificate and key come together and that the
// mutual-TLS listener has what it needs.
func (t *TLS) Validate() error {
	var errs []error
	if t.MTLSAddr != "" {
		if _, _, err := net.SplitHostPort(t.MTLSAddr); err != nil {
			errs = append(errs, invalidf(t, &t.MTLSAddr, "%q is not host:port", t.MTLSAddr))
		}
		if t.ClientCA == "" {
			errs = append(errs, fmt.Errorf("%s needs %s", envOf(t, &t.MTLSAddr), envOf(t, &t.ClientCA)))
		}
		if t.Cert == "" || t.Key == "" {
			errs = append(errs, fmt.Errorf("%s needs %s and %s", envOf(t, &t.MTLSAddr), envOf(t, &t.Cert), envOf(t, &t.Key)))
		}
	}
	if (t.Cert == "") != (t.Key == "") {
		errs = append(errs, fmt.Errorf("%s and %s must be set together", envOf(t, &t.Cert), envOf(t, &t.Key)))
	}
	return errors.Join(errs...)
}
