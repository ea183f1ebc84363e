package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"
)

// healthcheckCommand probes a running gatehouse over HTTP and exits 0 when
// it answers 200, 1 otherwise. The container image has no shell and no
// curl, so its HEALTHCHECK runs this; it reads the same GATEHOUSE_ADDR and
// GATEHOUSE_TLS_CERT as the server it probes, and nothing else of the
// configuration (no keys, no database).
func healthcheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "healthcheck",
		Usage: "GET /readyz of the local gatehouse; exit 0 when it answers 200, 1 otherwise (the container's HEALTHCHECK)",
		Description: "Without --url it asks the public listener of GATEHOUSE_ADDR (an unspecified host such as 0.0.0.0\n" +
			"  is reached on loopback), over HTTPS when GATEHOUSE_TLS_CERT is set; the server must then present\n" +
			"  that very certificate, whatever names it holds. Use --url …/healthz to ask only whether the\n" +
			"  process is alive (/readyz also fails while the process starts or drains before a shutdown,\n" +
			"  and, with GATEHOUSE_READY_REQUIRES, while a dependency it names is not ok).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Usage: "URL to GET (default: /readyz on GATEHOUSE_ADDR)", Sources: cli.EnvVars("GATEHOUSE_HEALTHCHECK_URL")},
			&cli.DurationFlag{Name: "timeout", Value: 4 * time.Second, Usage: "give up after this long (/readyz allows each of its checks 2s)", Sources: cli.EnvVars("GATEHOUSE_HEALTHCHECK_TIMEOUT")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			target := cmd.String("url")
			if target == "" {
				u, err := readyzURL(cmd.String("addr"), cmd.String("tls-cert") != "")
				if err != nil {
					return fmt.Errorf("healthcheck: %w", err)
				}
				target = u
			}
			client, err := healthClient(target, cmd.String("tls-cert"), cmd.Duration("timeout"))
			if err != nil {
				return fmt.Errorf("healthcheck: %w", err)
			}
			status, body, err := probe(ctx, client, target)
			if err != nil {
				return fmt.Errorf("healthcheck: %w", err)
			}
			if status != http.StatusOK {
				return fmt.Errorf("healthcheck: %s answered %d %s", target, status, body)
			}
			_, err = fmt.Fprintf(cmd.Root().Writer, "%s answered %d %s\n", target, status, body)
			return err
		},
	}
}

// readyzURL is the /readyz URL of the public listener at addr, reached on
// loopback when addr names no particular host (0.0.0.0, ::, empty).
func readyzURL(addr string, https bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("GATEHOUSE_ADDR: %q is not host:port", addr)
	}
	switch ip := net.ParseIP(host); {
	case host == "" || ip != nil && ip.IsUnspecified() && ip.To4() != nil:
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port), Path: "/readyz"}).String(), nil
}

// healthClient is an HTTP client that never follows redirects (a probe
// answers for the URL it was given) and, when certFile is set, accepts a
// server presenting exactly one of the certificates in that file (the
// server's own, which on loopback rarely names the address it is reached
// at); any other server certificate is verified as usual.
func healthClient(target, certFile string, timeout time.Duration) (*http.Client, error) {
	if timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("--url: %q is not an http:// or https:// URL", target)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	if certFile != "" {
		pinned, err := readCertificates(certFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			// Verification is done below (pinned, or the usual checks):
			// InsecureSkipVerify only replaces Go's own so that the
			// pinned certificate may carry any name.
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				return verifyPinnedOrUsual(cs, pinned, u.Hostname())
			},
		}
	}
	return &http.Client{
		Timeout:       timeout,
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// readCertificates reads the DER bytes of every certificate in a PEM file.
func readCertificates(file string) ([][]byte, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("GATEHOUSE_TLS_CERT: %w", err)
	}
	var out [][]byte
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, b.Bytes)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("GATEHOUSE_TLS_CERT: %s holds no PEM certificate", file)
	}
	return out, nil
}

// verifyPinnedOrUsual accepts a connection whose leaf certificate is one
// of pinned, and otherwise verifies the chain (system roots) and host as
// crypto/tls would have.
func verifyPinnedOrUsual(cs tls.ConnectionState, pinned [][]byte, host string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	for _, p := range pinned {
		if bytes.Equal(leaf.Raw, p) {
			return nil
		}
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Intermediates: inter})
	return err
}

// probe GETs target and returns the status and the start of the body
// (what /readyz says about each check), on one line.
func probe(ctx context.Context, c *http.Client, target string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode, strings.Join(strings.Fields(string(b)), " "), nil
}
