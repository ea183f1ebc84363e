package sender

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestForbiddenAddresses(t *testing.T) {
	for _, tt := range []struct {
		addr      string
		forbidden bool
	}{
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"::1", true},
		{"0.0.0.0", true},
		{"::", true},
		{"10.1.2.3", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"169.254.169.254", true}, // cloud metadata
		{"100.64.0.1", true},      // CGNAT
		{"100.127.255.255", true},
		{"224.0.0.1", true},
		{"255.255.255.255", true},
		{"fc00::1", true},
		{"fd12:3456::1", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"ff02::1", true},
		{"::ffff:127.0.0.1", true}, // IPv4-mapped
		{"::ffff:10.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::127.0.0.1", true},         // IPv4-compatible
		{"64:ff9b::7f00:1", true},     // NAT64 of 127.0.0.1
		{"2002:a9fe:a9fe::1", true},   // 6to4 of 169.254.169.254
		{"2001:0:4136:e378::1", true}, // Teredo
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"172.32.0.1", false},  // just outside 172.16/12
		{"100.128.0.1", false}, // just outside 100.64/10
		{"::ffff:8.8.8.8", false},
		{"64:ff9b::808:808", false},
		{"2002:808:808::1", false},
		{"2606:4700:4700::1111", false},
	} {
		t.Run(tt.addr, func(t *testing.T) {
			if got := forbidden(netip.MustParseAddr(tt.addr)); got != tt.forbidden {
				t.Errorf("forbidden(%s) = %v, want %v", tt.addr, got, tt.forbidden)
			}
		})
	}
}

func TestValidateCallbackURL(t *testing.T) {
	for _, tt := range []struct {
		url          string
		wantErr      error // nil: valid
		allowPrivate error // result with allowPrivate; same as wantErr unless noted
	}{
		{"https://partner.example.com/hooks/gatehouse", nil, nil},
		{"http://partner.example.com:8080/cb?x=1", nil, nil},
		{"https://8.8.8.8/cb", nil, nil},
		{"https://[2606:4700:4700::1111]/cb", nil, nil},
		{"http://127.0.0.1/cb", ErrForbiddenAddress, nil},
		{"http://127.0.0.1.:8080/", ErrForbiddenAddress, nil},
		{"http://[::1]/", ErrForbiddenAddress, nil},
		{"http://[::ffff:127.0.0.1]/", ErrForbiddenAddress, nil},
		{"http://[::ffff:7f00:1]/", ErrForbiddenAddress, nil},
		{"http://0.0.0.0/", ErrForbiddenAddress, nil},
		{"http://[::]/", ErrForbiddenAddress, nil},
		{"http://169.254.169.254/latest/meta-data/", ErrForbiddenAddress, nil},
		{"http://10.0.0.5/", ErrForbiddenAddress, nil},
		{"http://192.168.0.1/", ErrForbiddenAddress, nil},
		{"http://100.64.1.1/", ErrForbiddenAddress, nil},
		{"http://[fd00::1]/", ErrForbiddenAddress, nil},
		{"http://[fe80::1]/", ErrForbiddenAddress, nil},
		{"http://localhost:8080/", ErrForbiddenAddress, nil},
		{"http://api.LOCALHOST/", ErrForbiddenAddress, nil},
		{"http://127.0.0.%31/", ErrInvalidURL, ErrInvalidURL}, // percent-encoded host: the parser refuses it
		// Numeric forms the URL parser accepts and some resolvers map to IPs.
		{"http://2130706433/", ErrForbiddenAddress, ErrInvalidURL}, // decimal 127.0.0.1
		{"http://0x7f000001/", ErrForbiddenAddress, ErrInvalidURL}, // hex
		{"http://0x7f.0.0.1/", ErrForbiddenAddress, ErrInvalidURL}, // hex part
		{"http://0177.0.0.1/", ErrForbiddenAddress, ErrInvalidURL}, // octal part
		{"http://127.1/", ErrForbiddenAddress, ErrInvalidURL},      // short form
		{"http://0/", ErrForbiddenAddress, ErrInvalidURL},          // 0.0.0.0
		{"http://2852039166/", ErrForbiddenAddress, ErrInvalidURL}, // 169.254.169.254
		{"http://134744072/", ErrInvalidURL, ErrInvalidURL},        // 8.8.8.8, but not canonical
		{"http://1.2.3.4.5/", ErrInvalidURL, ErrInvalidURL},
		{"ftp://partner.example.com/", ErrInvalidURL, ErrInvalidURL},
		{"javascript:alert(1)", ErrInvalidURL, ErrInvalidURL},
		{"http:partner.example.com", ErrInvalidURL, ErrInvalidURL},
		{"//partner.example.com/cb", ErrInvalidURL, ErrInvalidURL},
		{"https:///cb", ErrInvalidURL, ErrInvalidURL},
		{"https://user:pw@partner.example.com/", ErrInvalidURL, ErrInvalidURL},
		{"https://partner.example.com:0/", ErrInvalidURL, ErrInvalidURL},
		{"https://partner.example.com:99999/", ErrInvalidURL, ErrInvalidURL},
		{"http://[fe80::1%25eth0]/", ErrInvalidURL, ErrInvalidURL},
		{"https://partner.example.com/" + strings.Repeat("a", MaxURLLength), ErrInvalidURL, ErrInvalidURL},
	} {
		t.Run(tt.url[:min(len(tt.url), 60)], func(t *testing.T) {
			check := func(allowPrivate bool, want error) {
				t.Helper()
				err := ValidateCallbackURL(tt.url, allowPrivate)
				if want == nil {
					if err != nil {
						t.Errorf("allowPrivate=%v: %v, want valid", allowPrivate, err)
					}
					return
				}
				if !errors.Is(err, want) {
					t.Errorf("allowPrivate=%v: error = %v, want %v", allowPrivate, err, want)
				}
			}
			check(false, tt.wantErr)
			check(true, tt.allowPrivate)
		})
	}
}

// A private address is refused when dialed, however the URL named it.
func TestGuardedDialer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	viaName := "http://localhost:" + u.Port() // resolved only at dial time

	client := func(d *net.Dialer) *http.Client {
		tr := &http.Transport{DialContext: d.DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}

	t.Run("refused by default", func(t *testing.T) {
		c := client(GuardedDialer(false, nil))
		for _, target := range []string{srv.URL, viaName} {
			resp, err := c.Get(target)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("GET %s succeeded, want ErrForbiddenAddress", target)
			}
			if !errors.Is(err, ErrForbiddenAddress) {
				t.Errorf("GET %s: error = %v, want ErrForbiddenAddress", target, err)
			}
		}
	})

	t.Run("allowed with allowPrivate", func(t *testing.T) {
		c := client(GuardedDialer(true, nil))
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
			t.Errorf("body = %q", b)
		}
	})

	t.Run("keeps the base dialer's settings and control", func(t *testing.T) {
		var calls atomic.Int64
		base := &net.Dialer{
			Timeout: 2 * time.Second,
			Control: func(string, string, syscall.RawConn) error { calls.Add(1); return nil },
		}
		d := GuardedDialer(false, base)
		if d == base || d.Timeout != base.Timeout {
			t.Fatalf("GuardedDialer must copy base (got %p from %p, timeout %s)", d, base, d.Timeout)
		}
		if _, err := d.DialContext(context.Background(), "tcp", u.Host); !errors.Is(err, ErrForbiddenAddress) {
			t.Fatalf("dial %s: error = %v, want ErrForbiddenAddress", u.Host, err)
		}
		if calls.Load() != 0 {
			t.Error("base control ran for a refused address")
		}
		// With private addresses allowed the base control still runs.
		conn, err := GuardedDialer(true, base).DialContext(context.Background(), "tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		if calls.Load() != 1 {
			t.Errorf("base control calls = %d, want 1", calls.Load())
		}
	})
}
