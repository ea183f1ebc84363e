package sender

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The reference vector of the Standard Webhooks libraries.
func TestSignKnownAnswer(t *testing.T) {
	got := Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`),
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}

// Signatures are checked by the official Go library, independent of Sign.
func TestSignVerifiesWithReferenceLibrary(t *testing.T) {
	oldSecret, newSecret, stranger := NewSecret(), NewSecret(), NewSecret()
	body := []byte(`{"eventType":"order.paid","bizData":"{\"order_no\":\"A1\"}","retryCount":0,"maxRetry":5}`)
	now := time.Now()
	sig := Sign("msg_1", now, body, oldSecret, newSecret)
	if n := len(strings.Split(sig, " ")); n != 2 {
		t.Fatalf("signature %q has %d entries, want one per secret", sig, n)
	}
	h := http.Header{}
	h.Set(HeaderID, "msg_1")
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, sig)

	for _, tt := range []struct {
		name   string
		secret string
		body   []byte
		ok     bool
	}{
		{"receiver with the old secret", oldSecret, body, true},
		{"receiver with the new secret", newSecret, body, true},
		{"receiver with another secret", stranger, body, false},
		{"tampered body", newSecret, append([]byte(nil), append(body, ' ')...), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wh, err := standardwebhooks.NewWebhook(tt.secret)
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(tt.body, h); (err == nil) != tt.ok {
				t.Errorf("Verify error = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if !strings.HasPrefix(a, "whsec_") {
		t.Errorf("secret %q lacks the whsec_ prefix", a)
	}
	key, err := ParseSecret(a)
	if err != nil || len(key) != 32 {
		t.Errorf("ParseSecret(%q) = %d bytes, %v; want 32 bytes", a, len(key), err)
	}
}

func TestParseSecretRejects(t *testing.T) {
	for _, s := range []string{"whsec_not base64!", "whsec_c2hvcnQ=", ""} {
		if _, err := ParseSecret(s); err == nil {
			t.Errorf("ParseSecret(%q) accepted", s)
		}
	}
	// An unusable secret is skipped, not signed with a wrong key.
	good := NewSecret()
	if got, want := Sign("m", time.Unix(1, 0), nil, "whsec_???", good), Sign("m", time.Unix(1, 0), nil, good); got != want {
		t.Errorf("Sign with a bad secret = %q, want %q", got, want)
	}
}
