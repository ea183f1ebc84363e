package fleettest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/app"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
)

// TestRedisTLSPrivateCA: a rediss:// URL to a Redis that serves TLS only
// (its plain port is for the test's own checks), with a certificate signed
// by a CA made in the test. With GATEHOUSE_REDIS_CA naming that CA,
// gatehouse starts, /readyz is ok and the signed partner calls run over
// TLS (admitted, then a replay refused). With the system roots instead, or
// another CA, the server is not trusted: the store fails with a
// certificate error, as /readyz's check does.
func TestRedisTLSPrivateCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile, caKey, caCert := writeCA(t, dir, "gatehouse test CA")
	otherCA, _, _ := writeCA(t, t.TempDir(), "another CA")
	certFile, keyFile := writeServerCert(t, dir, caCert, caKey)
	tlsPort := freeLoopbackPort(t)
	fleet.StartRedis(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	url := "rediss://127.0.0.1:" + strconv.Itoa(tlsPort) + "/0"

	f := setup(t, url, func(c *config.Config) { c.Redis.CA = caFile })
	if st, m := f.readyz(t); st != 200 || m["kv"] != "ok" {
		t.Fatalf("readyz over TLS with the private CA: %d %v", st, m)
	}
	u, r := f.query(t)
	if !admitted(r) {
		t.Fatalf("signed query over TLS: %s", r)
	}
	if r := f.call("GET", u); r.status != 401 || r.code != 4004 {
		t.Fatalf("replayed signed query over TLS: %s, want 401/4004", r)
	}

	for name, ca := range map[string]string{"system roots": "", "another CA": otherCA} {
		t.Run(name, func(t *testing.T) {
			cfg := apptest.Config(t, testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(t), RedisURL: url, KeyPrefix: "fleet:"})
			cfg.Redis.CA = ca
			if err := cfg.Resolve(); err != nil {
				t.Fatal(err)
			}
			logs := &apptest.SyncBuffer{}
			// Start-up goes on without Redis (a replica waits, out of
			// rotation, for its Redis to come back); the store says why.
			a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
			if err != nil {
				t.Fatalf("start with %s: %v", name, err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = a.Close(ctx)
			}()
			if err := a.KV.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("Redis with %s: %v, want a certificate error", name, err)
			}
		})
	}
}

// writeCA writes a new CA's certificate to dir and returns its path, key
// and certificate.
func writeCA(t *testing.T, dir, name string) (string, *ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key, cert
}

// writeServerCert writes a certificate for 127.0.0.1 signed by ca, and its
// key, to dir.
func writeServerCert(t *testing.T, dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "redis.pem"), filepath.Join(dir, "redis.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// freeLoopbackPort is a loopback port that was free just now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
