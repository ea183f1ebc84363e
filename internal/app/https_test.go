package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
)

// TestHTTPSBothListeners: with a certificate, the admin listener speaks
// HTTPS too (API keys never cross in clear), and both answer with HSTS.
func TestHTTPSBothListeners(t *testing.T) {
	ca := testenv.NewCA(t, "server CA")
	certPEM, keyPEM, _ := ca.Issue(t, "127.0.0.1", true, time.Now().Add(time.Hour))
	dir := t.TempDir()
	cfg := apptest.Config(t, testenv.Backend{Name: "sqlite"})
	cfg.TLS.Cert = writeFile(t, dir, "server.pem", certPEM)
	cfg.TLS.Key = writeFile(t, dir, "server.key", keyPEM)
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	s := serve(t, cfg)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	for name, addr := range map[string]string{"public": s.ls.Public.Addr().String(), "admin": s.ls.Admin.Addr().String()} {
		resp, err := c.Get("https://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("%s listener over HTTPS: %v", name, err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Fatalf("%s listener: Strict-Transport-Security %q", name, got)
		}
		// Plain HTTP gets no service.
		resp, err = http.Get("http://" + addr + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				t.Fatalf("%s listener answered plain HTTP: %s", name, body)
			}
		}
	}
	s.stop(t)
}

// TestTrustedProxyScheme: X-Forwarded-Proto is believed only from a
// trusted proxy; then responses carry HSTS and every cookie is Secure.
// From anyone else the header changes nothing.
func TestTrustedProxyScheme(t *testing.T) {
	for _, c := range []struct {
		name    string
		trusted string
		proto   string
		https   bool
	}{
		{"trusted proxy, https", "127.0.0.0/8", "https", true},
		{"trusted proxy, http", "127.0.0.0/8", "http", false},
		{"untrusted peer claims https", "", "https", false},
		{"other proxy trusted", "10.0.0.0/8", "https", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := apptest.Start(t, testenv.Backend{Name: "sqlite"}, func(cfg *config.Config) { cfg.Server.TrustedProxiesRaw = c.trusted })
			app, _, err := e.App.Partners.Create(context.Background(), partner.CreateInput{
				AppName: "proxied", RedirectURIs: []string{"https://client.example/cb"},
			})
			if err != nil {
				t.Fatal(err)
			}
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			req, _ := http.NewRequest("GET", e.PublicURL+"/oauth/authorize?client_id="+app.AppKey+"&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", nil)
			req.Header.Set("X-Forwarded-Proto", c.proto)
			r, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != 302 {
				t.Fatalf("authorize: HTTP %d", r.StatusCode)
			}
			hsts := r.Header.Get("Strict-Transport-Security")
			cookies := r.Header.Values("Set-Cookie")
			if len(cookies) == 0 {
				t.Fatal("no cookie set")
			}
			for _, ck := range cookies {
				if secure := strings.Contains(ck, "; Secure"); secure != c.https {
					t.Fatalf("cookie %q: Secure %v, want %v", ck, secure, c.https)
				}
			}
			if (hsts == "max-age=31536000") != c.https {
				t.Fatalf("Strict-Transport-Security %q", hsts)
			}
		})
	}
}

// TestPlainPostgresWarns: a Postgres deployment with neither TLS nor a
// trusted proxy warns at start that partner traffic must arrive over HTTPS.
func TestPlainPostgresWarns(t *testing.T) {
	b := testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(t)}
	e := apptest.Start(t, b)
	if !strings.Contains(e.Logs.String(), "level=WARN") || !strings.Contains(e.Logs.String(), "must arrive over HTTPS") {
		t.Fatalf("no HTTPS warning:\n%s", e.Logs.String())
	}
	e = apptest.Start(t, b, func(c *config.Config) { c.Server.TrustedProxiesRaw = "10.0.0.0/8" })
	if strings.Contains(e.Logs.String(), "must arrive over HTTPS") {
		t.Fatal("warned although a TLS-terminating proxy is configured")
	}
}

// TestStartWarnsAboutPerReplicaState: Postgres with the in-process store
// warns that replay memory, rate windows and revocation caches are per
// replica; with Redis it does not. Without GATEHOUSE_PUBLIC_URL every start
// warns that the OAuth metadata follows the Host header.
func TestStartWarnsAboutPerReplicaState(t *testing.T) {
	const perReplica = "replay memory, rate windows and revocation caches are per replica"
	const host = "GATEHOUSE_PUBLIC_URL is not set"
	warned := func(logs, what string) bool {
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, what) {
				return true
			}
		}
		return false
	}
	pg := testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(t)}
	e := apptest.Start(t, pg)
	if !warned(e.Logs.String(), perReplica) || !warned(e.Logs.String(), host) {
		t.Fatalf("Postgres without Redis or a public URL: missing WARN\n%s", e.Logs.String())
	}
	withRedis := pg
	withRedis.RedisURL, withRedis.KeyPrefix = testenv.RedisURL(t), testenv.KeyPrefix(t)
	e = apptest.Start(t, withRedis, func(c *config.Config) { c.Server.PublicURL = "https://gatehouse.example.com" })
	if warned(e.Logs.String(), perReplica) || warned(e.Logs.String(), host) {
		t.Fatalf("Postgres with Redis and a public URL warned:\n%s", e.Logs.String())
	}
	e = apptest.Start(t, testenv.Backend{Name: "sqlite"})
	if warned(e.Logs.String(), perReplica) {
		t.Fatalf("the embedded default warned about replicas:\n%s", e.Logs.String())
	}
	if !warned(e.Logs.String(), host) {
		t.Fatalf("embedded without a public URL: no WARN\n%s", e.Logs.String())
	}
}
