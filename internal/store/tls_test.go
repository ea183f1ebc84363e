package store

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestVerifyFullWithPrivateCA: a URL with sslmode=verify-full and
// sslrootcert naming a private CA parses, as Open parses it for its pools
// (and copies it for the pooler detection) and as LISTEN and the migration
// lock parse the session URL, into a TLS configuration that trusts that CA
// alone and checks the URL's host name, with no fallback to plain text.
// Only the parsing is checked: no TLS server is started here.
func TestVerifyFullWithPrivateCA(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "private test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "pg-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "postgres://gatehouse:pw@db.internal:5432/gatehouse?sslmode=verify-full&sslrootcert=" + ca
	pool, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	for name, cc := range map[string]*pgx.ConnConfig{"pools": pool.ConnConfig, "copied (pooler detection)": pool.ConnConfig.Copy(), "session (LISTEN, lock)": direct} {
		tc := cc.TLSConfig
		if tc == nil {
			t.Fatalf("%s: no TLS", name)
		}
		if tc.InsecureSkipVerify || tc.ServerName != "db.internal" || tc.RootCAs == nil {
			t.Fatalf("%s: InsecureSkipVerify %v, ServerName %q, RootCAs %v: want verification of db.internal against the CA", name, tc.InsecureSkipVerify, tc.ServerName, tc.RootCAs != nil)
		}
		if !tc.RootCAs.Equal(mustPool(t, der)) {
			t.Fatalf("%s: the roots are not the private CA alone", name)
		}
		if len(cc.Fallbacks) != 0 {
			t.Fatalf("%s: %d fallbacks (verify-full must not fall back to plain text)", name, len(cc.Fallbacks))
		}
	}
	if _, err := pgx.ParseConfig("postgres://db.internal/x?sslmode=verify-full&sslrootcert=" + filepath.Join(t.TempDir(), "missing.pem")); err == nil {
		t.Fatal("a missing CA file parses")
	}
}

func mustPool(t *testing.T, der []byte) *x509.CertPool {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}
