package sender

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a webhook request (Standard Webhooks). HeaderLegacySignature
// carries the same value as HeaderSignature for receivers written against
// the original platform's X-Webhook-Signature.
const (
	HeaderID              = "webhook-id"
	HeaderTimestamp       = "webhook-timestamp"
	HeaderSignature       = "webhook-signature"
	HeaderLegacySignature = "X-Webhook-Signature"
)

// SecretPrefix starts every webhook signing secret.
const SecretPrefix = "whsec_"

// Key sizes accepted in a secret, as recommended by Standard Webhooks.
const (
	minKeyBytes = 24
	maxKeyBytes = 64
	newKeyBytes = 32
)

// NewSecret returns a fresh signing secret: "whsec_" followed by the
// standard base64 encoding of 32 random bytes.
func NewSecret() string {
	key := make([]byte, newKeyBytes)
	_, _ = rand.Read(key) // never fails since Go 1.24
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// ParseSecret returns the HMAC key of a secret: the base64-decoded part
// after "whsec_" (the prefix is optional, as in the reference libraries).
func ParseSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("webhook: secret is not base64 after %q: %w", SecretPrefix, err)
	}
	if len(key) < minKeyBytes || len(key) > maxKeyBytes {
		return nil, fmt.Errorf("webhook: secret key is %d bytes, want %d to %d", len(key), minKeyBytes, maxKeyBytes)
	}
	return key, nil
}

// Sign returns the value of the webhook-signature header: for each secret,
// "v1," followed by the base64 HMAC-SHA256 of msgID + "." + unix seconds of
// ts + "." + body, joined by spaces. Several secrets are given while a
// rotated secret is still valid, so receivers holding either one verify.
//
// Secrets that ParseSecret rejects are skipped rather than signed with a
// key the receiver cannot have; validate secrets with ParseSecret when they
// are stored.
func Sign(msgID string, ts time.Time, body []byte, secrets ...string) string {
	content := make([]byte, 0, len(msgID)+len(body)+24)
	content = append(content, msgID...)
	content = append(content, '.')
	content = strconv.AppendInt(content, ts.Unix(), 10)
	content = append(content, '.')
	content = append(content, body...)

	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := ParseSecret(s)
		if err != nil {
			continue
		}
		m := hmac.New(sha256.New, key)
		m.Write(content)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

// RedactSignature keeps the shape of a signature header ("v1,… v1,…", one
// entry per secret) without the MACs.
func RedactSignature(v string) string {
	parts := strings.Fields(v)
	for i, p := range parts {
		if ver, _, ok := strings.Cut(p, ","); ok {
			parts[i] = ver + ",[redacted]"
		} else {
			parts[i] = "[redacted]"
		}
	}
	return strings.Join(parts, " ")
}
