package outbound

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Headers of a signed outbound request.
const (
	HeaderAPIKey    = "X-API-Key"
	HeaderTimestamp = "X-Timestamp"
	HeaderNonce     = "X-Nonce"
	HeaderSignature = "X-Signature"
)

// Signer signs outbound requests as the specification describes for calls
// to external services: X-API-Key, X-Timestamp (milliseconds since the
// epoch, like the partner API), X-Nonce and
// X-Signature = Base64(HMAC-SHA256(Secret, body + timestamp + nonce)).
// APIKey and Secret come from configuration.
type Signer struct {
	APIKey string
	Secret []byte
}

// Sign sets the four headers on req. The body is read through req.GetBody
// when present (or buffered and made replayable), so req can still be sent.
func (s Signer) Sign(req *http.Request) error {
	if len(s.Secret) == 0 {
		return errors.New("outbound: signer has no secret")
	}
	if err := replayable(req); err != nil {
		return err
	}
	var body []byte
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return fmt.Errorf("outbound: reading body to sign: %w", err)
		}
		body, err = io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("outbound: reading body to sign: %w", err)
		}
	}
	// A fresh timestamp and nonce for every attempt: a receiver refuses a
	// nonce it has seen.
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	n := newNonce()
	req.Header.Set(HeaderAPIKey, s.APIKey)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderNonce, n)
	req.Header.Set(HeaderSignature, s.Signature(body, ts, n))
	return nil
}

// Signature returns Base64(HMAC-SHA256(Secret, body + timestamp + nonce)).
func (s Signer) Signature(body []byte, timestamp, nonce string) string {
	m := hmac.New(sha256.New, s.Secret)
	m.Write(body)
	m.Write([]byte(timestamp))
	m.Write([]byte(nonce))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails since Go 1.24
	return fmt.Sprintf("%x", b)
}
