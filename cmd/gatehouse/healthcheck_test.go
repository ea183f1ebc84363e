package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

// TestHealthcheckCommand: `gatehouse healthcheck` exits 0 while the server
// is ready, and 1 when nothing listens and while the server drains before
// a shutdown (its /readyz says 503), so a container runtime and compose's
// depends_on see the same truth as the load balancer.
func TestHealthcheckCommand(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		global, _ := cliArgs(t, b)
		addr, admin := freeLoopback(t), freeLoopback(t)
		// Clipped: the serving goroutine and the probes append to it at once.
		global = slices.Clip(append(global, "--addr", addr, "--admin-addr", admin))

		if _, _, err := runCLI(t, append(global, "healthcheck", "--timeout", "1s"), ""); err == nil {
			t.Fatal("healthcheck passed with nothing listening")
		}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		served := make(chan error, 1)
		go func() {
			served <- run(ctx, append(global, "--shutdown-drain", "3s", "serve"), strings.NewReader(""), &strings.Builder{}, &strings.Builder{})
		}()
		var out string
		waitFor(t, "healthcheck to pass", func() bool {
			o, _, err := runCLI(t, append(global, "healthcheck", "--timeout", "1s"), "")
			out = o
			return err == nil
		})
		if !strings.Contains(out, "http://"+addr+"/readyz answered 200") || !strings.Contains(out, `"database":"ok"`) {
			t.Fatalf("healthcheck output: %q", out)
		}
		if o, _, err := runCLI(t, append(global, "healthcheck", "--url", "http://"+addr+"/healthz"), ""); err != nil {
			t.Fatalf("healthcheck --url …/healthz: %v %q", err, o)
		}

		cancel() // SIGTERM: /readyz answers 503 for the drain
		waitFor(t, "healthcheck to fail while draining", func() bool {
			_, _, err := runCLI(t, append(global, "healthcheck", "--timeout", "1s"), "")
			return err != nil && strings.Contains(err.Error(), "answered 503") && strings.Contains(err.Error(), "shutting_down")
		})
		// The liveness URL still answers during the drain.
		if _, _, err := runCLI(t, append(global, "healthcheck", "--url", "http://"+addr+"/healthz"), ""); err != nil {
			t.Fatalf("/healthz during the drain: %v", err)
		}
		if err := <-served; err != nil {
			t.Fatalf("serve: %v", err)
		}
	})
}

// TestHealthcheckTLS: with GATEHOUSE_TLS_CERT the probe speaks HTTPS and
// accepts the server's own certificate although it does not name the
// loopback address; a server presenting any other certificate fails.
func TestHealthcheckTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "served")
	other, _ := selfSigned(t, dir, "other")
	addr, admin := freeLoopback(t), freeLoopback(t)
	global := slices.Clip([]string{"gatehouse", "--data-dir", dir, "--addr", addr, "--admin-addr", admin})

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- run(ctx, append(global, "--tls-cert", cert, "--tls-key", key, "serve"), strings.NewReader(""), &strings.Builder{}, &strings.Builder{})
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	waitFor(t, "healthcheck over HTTPS to pass", func() bool {
		out, _, err := runCLI(t, append(global, "--tls-cert", cert, "healthcheck", "--timeout", "1s"), "")
		return err == nil && strings.Contains(out, "https://"+addr+"/readyz answered 200")
	})
	if _, _, err := runCLI(t, append(global, "--tls-cert", other, "healthcheck"), ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a server with another certificate passed: %v", err)
	}
	if _, _, err := runCLI(t, append(global, "healthcheck", "--url", "https://"+addr+"/readyz"), ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unverifiable certificate passed without the pin: %v", err)
	}
}

// TestReadyzURL: an address that names no host is probed on loopback.
func TestReadyzURL(t *testing.T) {
	for _, c := range []struct {
		addr  string
		https bool
		want  string
	}{
		{"0.0.0.0:8080", false, "http://127.0.0.1:8080/readyz"},
		{":8080", false, "http://127.0.0.1:8080/readyz"},
		{"[::]:8443", true, "https://[::1]:8443/readyz"},
		{"10.1.2.3:8080", false, "http://10.1.2.3:8080/readyz"},
		{"gatehouse.internal:8080", true, "https://gatehouse.internal:8080/readyz"},
	} {
		got, err := readyzURL(c.addr, c.https)
		if err != nil || got != c.want {
			t.Errorf("readyzURL(%q, %v) = %q, %v; want %q", c.addr, c.https, got, err, c.want)
		}
	}
	if _, err := readyzURL("8080", false); err == nil {
		t.Error("an address without a port was accepted")
	}
}

// freeLoopback is a loopback address whose port was free a moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// selfSigned writes a self-signed certificate for a name that is not the
// loopback address, and its key, into dir.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name + ".gatehouse.internal"},
		DNSNames:     []string{name + ".gatehouse.internal"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
