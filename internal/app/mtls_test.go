package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMutualTLS: the GATEHOUSE_MTLS_ADDR listener serves the public
// routes to clients presenting a certificate from GATEHOUSE_CLIENT_CA; a
// client without one, or with one from another CA, or an expired one,
// does not complete the handshake (TLS 1.2 and 1.3). The public listener
// speaks HTTPS without asking for a client certificate.
func TestMutualTLS(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		serverCA, clientCA, rogueCA := testenv.NewCA(t, "server CA"), testenv.NewCA(t, "client CA"), testenv.NewCA(t, "rogue CA")
		dir := t.TempDir()
		srvCert, srvKey, _ := serverCA.Issue(t, "127.0.0.1", true, time.Now().Add(time.Hour))
		_, _, trusted := clientCA.Issue(t, "partner-1", false, time.Now().Add(time.Hour))
		_, _, rogue := rogueCA.Issue(t, "partner-1", false, time.Now().Add(time.Hour))
		_, _, expired := clientCA.Issue(t, "partner-1", false, time.Now().Add(-time.Hour))

		cfg := apptest.Config(t, b)
		cfg.TLS.MTLSAddr = "127.0.0.1:0"
		cfg.TLS.Cert = writeFile(t, dir, "server.pem", srvCert)
		cfg.TLS.Key = writeFile(t, dir, "server.key", srvKey)
		cfg.TLS.ClientCA = writeFile(t, dir, "clients.pem", clientCA.PEM)
		if err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		done := serve(t, cfg)
		ls := done.ls

		roots := x509.NewCertPool()
		roots.AddCert(serverCA.Cert)
		client := func(minV, maxV uint16, certs ...tls.Certificate) *http.Client {
			return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(roots, minV, maxV, certs)}}
		}
		mtlsURL := "https://" + ls.MTLS.Addr().String()
		publicURL := "https://" + ls.Public.Addr().String()

		// Public listener: HTTPS, no client certificate needed.
		if body := mustGet(t, client(tls.VersionTLS12, tls.VersionTLS13), publicURL+"/healthz"); !strings.Contains(body, "ok") {
			t.Fatalf("public HTTPS: %s", body)
		}
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			name := map[uint16]string{tls.VersionTLS12: "TLS1.2", tls.VersionTLS13: "TLS1.3"}[v]
			t.Run(name, func(t *testing.T) {
				c := client(v, v, trusted)
				mustGet(t, c, mtlsURL+"/healthz")
				if body := mustGet(t, c, mtlsURL+"/api/tickets"); !strings.HasPrefix(body, "[") {
					t.Fatalf("public route over mTLS: %s", body)
				}
				for what, certs := range map[string][]tls.Certificate{
					"no certificate":        nil,
					"untrusted certificate": {rogue},
					"expired certificate":   {expired},
				} {
					resp, err := client(v, v, certs...).Get(mtlsURL + "/healthz")
					if err == nil {
						resp.Body.Close()
						t.Fatalf("%s: HTTP %d, want a failed handshake", what, resp.StatusCode)
					}
					// Also at the TLS level: the connection never carries a request.
					if handshakeAndRead(t, ls.MTLS.Addr().String(), roots, v, certs) == nil {
						t.Fatalf("%s: the TLS connection was established", what)
					}
				}
			})
		}
		done.stop(t)
	})
}

type served struct {
	ls     *app.Listeners
	cancel context.CancelFunc
	done   chan struct{}
	err    *error
}

// stop shuts the app down and checks that Serve returned nil.
func (s served) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	<-s.done
	if *s.err != nil {
		t.Fatalf("Serve: %v", *s.err)
	}
}

func serve(t *testing.T, cfg config.Config) served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	s := served{ls: ls, cancel: cancel, done: make(chan struct{}), err: new(error)}
	go func() {
		defer close(s.done)
		*s.err = a.Serve(ctx, ls)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

// clientTLS presents certs[0] whatever CAs the server says it accepts
// (Go's default would silently send nothing for a certificate from an
// issuer the server does not name, and the untrusted case would test the
// missing-certificate case again).
func clientTLS(roots *x509.CertPool, minV, maxV uint16, certs []tls.Certificate) *tls.Config {
	cfg := &tls.Config{RootCAs: roots, MinVersion: minV, MaxVersion: maxV}
	if len(certs) > 0 {
		c := certs[0]
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	return cfg
}

func mustGet(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: HTTP %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

// handshakeAndRead completes the client side of the handshake and reads
// once: with TLS 1.3 the server's refusal of the client certificate
// arrives after the client's own handshake finished, so only the read
// tells. It returns nil when the connection works.
func handshakeAndRead(t *testing.T, addr string, roots *x509.CertPool, v uint16, certs []tls.Certificate) error {
	t.Helper()
	cfg := clientTLS(roots, v, v, certs)
	cfg.NextProtos = []string{"http/1.1"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 64))
	if err == nil {
		return nil
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("refusal reads as %v; want a TLS certificate alert", err)
	}
	return err
}

// TestServeTLSMisconfiguration: an unreadable client CA stops Serve with a
// clear error, and the listeners are released.
func TestServeTLSMisconfiguration(t *testing.T) {
	ca := testenv.NewCA(t, "server CA")
	dir := t.TempDir()
	c, k, _ := ca.Issue(t, "127.0.0.1", true, time.Now().Add(time.Hour))
	cfg := apptest.Config(t, testenv.Backend{Name: "sqlite"})
	cfg.TLS.MTLSAddr = "127.0.0.1:0"
	cfg.TLS.Cert = writeFile(t, dir, "server.pem", c)
	cfg.TLS.Key = writeFile(t, dir, "server.key", k)
	cfg.TLS.ClientCA = writeFile(t, dir, "clients.pem", []byte("not a certificate"))
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := a.Listen()
	if err != nil {
		t.Fatal(err)
	}
	err = a.Serve(context.Background(), ls)
	if err == nil || !strings.Contains(err.Error(), "GATEHOUSE_CLIENT_CA") {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ls.MTLS.Addr().String(), time.Second); err == nil {
		t.Fatal("the mTLS listener is still open")
	}
}
