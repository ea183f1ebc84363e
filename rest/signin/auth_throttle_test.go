package signin_test

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/config"
	"gatehouse/internal/identity"
	"gatehouse/internal/testenv"
)

// fromAddr is an HTTP client whose connections leave from the loopback
// address ip (any 127.0.0.0/8 address is local on Linux), so the service
// sees a different client address per client.
func fromAddr(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func loginFrom(t *testing.T, c *http.Client, f *auFix, password string, headers ...string) auResp {
	t.Helper()
	return auJSON(t, c, f.PublicURL+"/api/auth/login", `{"username":"alice","password":"`+password+`"}`, headers...)
}

// TestLoginThrottleNoLockOut: a guesser at one address is refused after
// 10 failures (even with the right password, and whatever X-Forwarded-For
// it sends, as no proxy is trusted), while alice at another address still
// signs in; failures from many addresses together reach the per-username
// cap of 100, which then refuses every address.
func TestLoginThrottleNoLockOut(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		guesser := fromAddr(t, "127.0.0.2")
		for i := range identity.DefaultLoginAttempts {
			// A new forged address each time: not believed.
			loginFrom(t, guesser, f, "guess", "X-Forwarded-For", "203.0.113."+itoa(i)).expectError(t, 401, "invalid_credentials")
		}
		loginFrom(t, guesser, f, f.password).expectError(t, 429, "too_many_attempts")
		loginFrom(t, guesser, f, "guess", "X-Forwarded-For", "198.51.100.1").expectError(t, 429, "too_many_attempts")
		// The form at the same address shares the pair's count.
		if r := auForm(t, guesser, f.PublicURL+"/login", url.Values{"username": {"alice"}, "password": {f.password}}); r.status != 429 {
			t.Fatalf("form login from the throttled address: HTTP %d", r.status)
		}
		if r := loginFrom(t, fromAddr(t, "127.0.0.3"), f, f.password); r.status != 200 {
			t.Fatalf("alice from another address: HTTP %d %s", r.status, r.body)
		}

		// 10 so far; 90 more from nine other addresses reach the cap.
		for a := range 9 {
			c := fromAddr(t, "127.0.1."+itoa(a+1))
			for range identity.DefaultLoginAttempts {
				loginFrom(t, c, f, "guess").expectError(t, 401, "invalid_credentials")
			}
		}
		loginFrom(t, fromAddr(t, "127.0.2.1"), f, f.password).expectError(t, 429, "too_many_attempts")
		// Another user is not affected.
		auUser(t, f.Env, "carol", "carol password")
		if r := auJSON(t, fromAddr(t, "127.0.2.1"), f.PublicURL+"/api/auth/login", `{"username":"carol","password":"carol password"}`); r.status != 200 {
			t.Fatalf("carol: HTTP %d %s", r.status, r.body)
		}
	})
}

// TestTrustedProxyClientAddress: behind a trusted proxy, the throttle
// counts the address the proxy forwards (the right-most untrusted entry of
// X-Forwarded-For), and the request log shows it.
func TestTrustedProxyClientAddress(t *testing.T) {
	f := auSetup(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) { c.Server.TrustedProxiesRaw = "127.0.0.1/32, 10.0.0.0/8" })
	proxy := fromAddr(t, "127.0.0.1")
	for range identity.DefaultLoginAttempts {
		// The client wrote "1.1.1.1" itself; 203.0.113.5 is what the edge
		// proxy saw; 10.1.2.3 is an inner proxy.
		loginFrom(t, proxy, f, "guess", "X-Forwarded-For", "1.1.1.1, 203.0.113.5, 10.1.2.3").expectError(t, 401, "invalid_credentials")
	}
	loginFrom(t, proxy, f, f.password, "X-Forwarded-For", "9.9.9.9, 203.0.113.5").expectError(t, 429, "too_many_attempts")
	if r := loginFrom(t, proxy, f, f.password, "X-Forwarded-For", "203.0.113.6"); r.status != 200 {
		t.Fatalf("another forwarded address: HTTP %d %s", r.status, r.body)
	}
	if !strings.Contains(f.Logs.String(), "remote=203.0.113.5") {
		t.Fatal("the request log does not show the forwarded client address")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
