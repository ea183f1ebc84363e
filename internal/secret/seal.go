// Package secret keeps gatehouse's handling of secrets in one place:
// encryption of stored secrets, random tokens, token and password hashing,
// and constant-time comparison.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// KeySize is the length of a Sealer key: AES-256.
const KeySize = 32

// Sealed format, version 1: version (1 byte) || nonce (12) || ciphertext || tag (16).
// The version byte lets a later key or algorithm coexist with values sealed
// under this one; it is authenticated as additional data, so it cannot be
// changed without Open noticing.
const (
	version1  byte = 1
	nonceSize      = 12
	tagSize        = 16
	overhead       = 1 + nonceSize + tagSize
)

// ErrCannotOpen wraps every reason Open refuses a sealed value.
var ErrCannotOpen = errors.New("secret: cannot open sealed value")

// Sealer encrypts secrets for storage (partner app secrets, webhook
// secrets) with AES-256-GCM. It is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer returns a Sealer for a key of exactly [KeySize] bytes.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret: sealing key is %d bytes, want exactly %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	aead, err := cipher.NewGCMWithNonceSize(block, nonceSize)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts and authenticates plaintext under a fresh random nonce.
// Random 96-bit nonces are safe for far more values than gatehouse will
// ever seal under one key (the limit is about 2^32).
func (s *Sealer) Seal(plaintext []byte) ([]byte, error) {
	out := make([]byte, 1+nonceSize, overhead+len(plaintext))
	out[0] = version1
	nonce := out[1:]
	// crypto/rand.Read never fails (it aborts the process instead).
	_, _ = rand.Read(nonce)
	// The additional data is a separate slice: GCM forbids it to overlap dst.
	return s.aead.Seal(out, nonce, plaintext, []byte{version1}), nil
}

// Open decrypts a value made by Seal. Any change to it, a different key, or
// input too short to be a sealed value yields an error wrapping
// [ErrCannotOpen]; Open never panics on malformed input.
func (s *Sealer) Open(sealed []byte) ([]byte, error) {
	if len(sealed) == 0 {
		return nil, fmt.Errorf("%w: empty input", ErrCannotOpen)
	}
	if sealed[0] != version1 {
		return nil, fmt.Errorf("%w: unknown format version %d", ErrCannotOpen, sealed[0])
	}
	if len(sealed) < overhead {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the %d-byte minimum", ErrCannotOpen, len(sealed), overhead)
	}
	plaintext, err := s.aead.Open(nil, sealed[1:1+nonceSize], sealed[1+nonceSize:], sealed[:1])
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed (altered, truncated, or sealed with another key)", ErrCannotOpen)
	}
	return plaintext, nil
}
