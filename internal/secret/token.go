package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// RandomBytes returns n bytes from crypto/rand.
func RandomBytes(n int) []byte {
	b := make([]byte, n)
	// crypto/rand.Read never fails (it aborts the process instead).
	_, _ = rand.Read(b)
	return b
}

// RandomToken returns prefix followed by nBytes random bytes in URL-safe
// base64 without padding, so the token can travel in URLs, headers and
// form fields unescaped. Use nBytes >= 16 (128 bits) for anything that
// grants access; the prefix only makes tokens recognisable (in logs
// scanners, for instance).
func RandomToken(prefix string, nBytes int) string {
	return prefix + base64.RawURLEncoding.EncodeToString(RandomBytes(nBytes))
}

// HashToken returns the hex SHA-256 of a high-entropy token (API key,
// access or refresh token, authorization code), which is what is stored and
// looked up. A plain fast hash is right here: the tokens are random with at
// least 128 bits, so there is nothing to guess or precompute, and no salt is
// needed, which keeps lookup by hash possible. Never use it for passwords
// (see [HashPassword]).
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
