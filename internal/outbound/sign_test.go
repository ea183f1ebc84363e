package outbound

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSignerKnownAnswer(t *testing.T) {
	const body = `{"order_no":"A1","amount":100}`
	s := Signer{APIKey: "partner-key", Secret: []byte("test-secret-from-config")}
	// Computed outside Go:
	//   printf '%s' '{"order_no":"A1","amount":100}1763805600123nonce-1' |
	//     openssl dgst -sha256 -hmac 'test-secret-from-config' -binary | base64
	if got := s.Signature([]byte(body), "1763805600123", "nonce-1"); got != "/oOrNijzqpfTxahDF0qc6HTN53dqTRUnNJMxhXqhuZc=" {
		t.Errorf("signature %q", got)
	}
}

// Sign sets the four headers: the time in milliseconds, a fresh nonce on
// every call, and the signature over the body with those two.
func TestSignSetsTheHeaders(t *testing.T) {
	const body = `{"order_no":"A1","amount":100}`
	s := Signer{APIKey: "partner-key", Secret: []byte("test-secret-from-config")}
	nonces := map[string]bool{}
	for range 2 {
		before := time.Now().UnixMilli()
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", strings.NewReader(body))
		if err := s.Sign(req); err != nil {
			t.Fatal(err)
		}
		ts, nonce := req.Header.Get(HeaderTimestamp), req.Header.Get(HeaderNonce)
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ms < before || ms > time.Now().UnixMilli() {
			t.Errorf("%s = %q, want the time in milliseconds", HeaderTimestamp, ts)
		}
		if len(nonce) != 32 || nonces[nonce] {
			t.Errorf("%s = %q: not 16 fresh random bytes in hex", HeaderNonce, nonce)
		}
		nonces[nonce] = true
		if req.Header.Get(HeaderAPIKey) != "partner-key" || req.Header.Get(HeaderSignature) != s.Signature([]byte(body), ts, nonce) {
			t.Errorf("headers %v", req.Header)
		}
		// Signing must leave the body sendable.
		if b, _ := io.ReadAll(req.Body); string(b) != body {
			t.Errorf("body after signing = %q", b)
		}
	}
}

// A receiver checks what actually arrived on the wire with its own HMAC.
func TestSignedCallVerifiesAtReceiver(t *testing.T) {
	secret := []byte("another-secret")
	verified := make(chan bool, 1)
	srv := newCountingServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(string(b) + r.Header.Get("X-Timestamp") + r.Header.Get("X-Nonce")))
		want := base64.StdEncoding.EncodeToString(m.Sum(nil))
		verified <- r.Header.Get("X-Api-Key") == "k1" && hmac.Equal([]byte(want), []byte(r.Header.Get("X-Signature")))
	})
	c := newClient(t, testConfig())
	req, _ := http.NewRequest(http.MethodPost, srv.URL, opaqueBody{strings.NewReader(`{"a":1}`)})
	resp, err := c.Do(context.Background(), req, CallOptions{Signer: &Signer{APIKey: "k1", Secret: secret}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !<-verified {
		t.Error("receiver could not verify the signature")
	}
}

func TestSignerRefusesEmptySecret(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	if err := (Signer{APIKey: "k"}).Sign(req); err == nil {
		t.Error("signing without a secret succeeded")
	}
}
