package store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

// TestVerifyFullAgainstPrivateTLSPostgres starts a Postgres cluster of its
// own (initdb, as the postgres user) serving TLS with a certificate signed
// by a CA made here, and opens, migrates and queries it with
// sslmode=verify-full&sslrootcert=<that CA>: the session is encrypted. The
// same URL with another CA is refused.
func TestVerifyFullAgainstPrivateTLSPostgres(t *testing.T) {
	t.Parallel()
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	u, err3 := user.Lookup("postgres")
	if err := cmpErr(err1, err2, err3); err != nil || os.Geteuid() != 0 {
		if testenv.Required() {
			t.Fatalf("initdb/postgres and root are needed for a private TLS cluster (required in CI): %v (euid %d)", err, os.Geteuid())
		}
		t.Skipf("no private TLS cluster: %v (euid %d)", err, os.Geteuid())
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	dir, err := os.MkdirTemp("", "pgtls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	cmd.SysProcAttr = cred
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}

	caKey, caCert, caDER := newCA(t, "gatehouse test CA")
	_, _, otherDER := newCA(t, "another CA")
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"server.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		"server.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, body, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	ca := filepath.Join(dir, "ca.pem")
	other := filepath.Join(dir, "other.pem")
	for p, der := range map[string][]byte{ca: caDER, other: otherDER} {
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := exec.Command(postgres, "-D", data, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+dir, "-c", "ssl=on", "-c", "fsync=off")
	srv.SysProcAttr = cred
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGINT); <-done }) // fast shutdown, by PID

	url := fmt.Sprintf("postgres://postgres@localhost:%d/postgres?sslmode=verify-full&sslrootcert=%s", port, ca)
	ctx := context.Background()
	var db *DB
	deadline := time.Now().Add(30 * time.Second)
	for {
		if db, err = Open(ctx, url); err == nil {
			break
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			t.Fatalf("postgres exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("open over verify-full: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // waiting for the child server to accept
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var encrypted bool
	if err := db.SQL.QueryRowContext(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&encrypted); err != nil || !encrypted {
		t.Fatalf("session encrypted: %v, %v", encrypted, err)
	}
	if db.ThroughPooler() {
		t.Fatal("a server reached directly over TLS is taken for a pooler")
	}
	if _, err := Open(ctx, fmt.Sprintf("postgres://postgres@localhost:%d/postgres?sslmode=verify-full&sslrootcert=%s", port, other)); err == nil {
		t.Fatal("a server certificate of another CA was accepted")
	}
}

func cmpErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func newCA(t *testing.T, name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
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
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, c, der
}
