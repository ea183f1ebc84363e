package redact_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"gatehouse/internal/redact"
)

// forms are the host forms of a hostile run: an ASCII host, a non-ASCII
// one (the dot is U+3002, an ideographic full stop), a percent-encoded
// one, an IPv6 zone, user information and a backslash.
var forms = []struct{ raw, want string }{
	{"https://partner.example/hooks/in?token=SECRET", "https://partner.example"},
	{"https://partner。example/hooks/in?token=SECRET", "https://partner。example"},
	{"https://partner%E3%80%82example/hooks/in?token=SECRET", "https://partner%E3%80%82example"},
	{"https://partner%2eexample/hooks/in?token=SECRET", "https://partner%2eexample"},
	{"http://[fe80::1%25eth0]/x?token=SECRET", "http://[fe80::1%25eth0]"},
	{"http://[fe80::1%25eth0]:8080/x?token=SECRET", "http://[fe80::1%25eth0]:8080"},
	{"https://user:SECRET@partner.example:8443/x", "https://partner.example:8443"},
	{"https://SECRET@partner.example", "https://partner.example"},
	{"HTTPS://partner.example#SECRET", "https://partner.example"},
	{"https://partner.example\\SECRET", "https://partner.example"},
	{"https://partner.example?token=SECRET", "https://partner.example"},
	{"not a url SECRET", redact.Unknown},
}

func TestURL(t *testing.T) {
	for _, f := range forms {
		if got := redact.URL(f.raw); got != f.want {
			t.Errorf("URL(%q) = %q, want %q", f.raw, got, f.want)
		}
	}
}

// TestText: an error text naming the URL in any form (as given, as
// net/url re-encodes it, quoted, with the password masked) keeps no
// secret.
func TestText(t *testing.T) {
	for _, f := range forms[:len(forms)-1] {
		msgs := []string{
			fmt.Sprintf("Post %q: dial tcp: no such host", f.raw),
			"redirected to " + f.raw + " and gave up",
		}
		if u, err := url.Parse(f.raw); err == nil {
			msgs = append(msgs, (&url.Error{Op: "Post", URL: u.String(), Err: errors.New("x")}).Error(),
				(&url.Error{Op: "Post", URL: u.Redacted(), Err: errors.New("x")}).Error(),
				"without scheme: "+strings.TrimPrefix(u.String(), u.Scheme+"://"))
		}
		for _, m := range msgs {
			if got := redact.Text(m, f.raw); strings.Contains(got, "SECRET") {
				t.Errorf("Text(%q) = %q: the secret is still there", m, got)
			}
		}
	}
}

func TestError(t *testing.T) {
	err := fmt.Errorf("attempt: %w", redact.Error(&url.Error{Op: "Post", URL: "https://partner%E3%80%82example/hooks/in?token=SECRET", Err: errors.New("no such host")}))
	if got := err.Error(); strings.Contains(got, "SECRET") || !strings.Contains(got, "partner%E3%80%82example") {
		t.Errorf("Error: %q", got)
	}
}
