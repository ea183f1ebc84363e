package oauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gatehouse/internal/secret"
)

// pendingIDBytes is the entropy of a pending request's id (128 bits): the
// id names one request in a browser's session and in its approval form.
const pendingIDBytes = 16

// Pending is a validated authorization request waiting for the user's
// decision. Each has its own unguessable ID, carried by the approval page
// that shows it, so that a decision applies to exactly the request the
// user saw, and several can wait side by side (several tabs).
//
// Until the browser's user signs in, a pending request lives only in a
// sealed cookie ([Service.SealPending]): a stranger creates no server-side
// state. Once signed in, it is kept in the user's session, bound to UserID.
type Pending struct {
	ID            string    `json:"id"`
	UserID        int       `json:"uid,omitempty"`
	AppID         int       `json:"app_id"`
	ClientID      string    `json:"client_id"`
	AppName       string    `json:"app_name"`
	RedirectURI   string    `json:"redirect_uri"`
	Scope         string    `json:"scope"`
	State         string    `json:"state"`
	CodeChallenge string    `json:"code_challenge,omitempty"`
	Created       time.Time `json:"created"`
}

// Scopes returns the requested scopes as a list.
func (p Pending) Scopes() []string { return strings.Fields(p.Scope) }

// ExpiredAt reports whether the user took longer than PendingTTL.
func (p Pending) ExpiredAt(now time.Time) bool { return !now.Before(p.Created.Add(PendingTTL)) }

// pendingKeyLabel derives the cookie-sealing key from the master key, so
// that a sealed pending request can never be confused with a stored
// secret sealed under the master key itself.
const pendingKeyLabel = "gatehouse oauth pending request cookie v1"

func pendingSealer(masterKey []byte) (*secret.Sealer, error) {
	m := hmac.New(sha256.New, masterKey)
	m.Write([]byte(pendingKeyLabel))
	return secret.NewSealer(m.Sum(nil))
}

// SealPending encrypts and authenticates p (AES-256-GCM) for a cookie
// value: the browser carries it, cannot read or change it, and the
// service keeps nothing.
func (s *Service) SealPending(p Pending) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("oauth: encode pending request: %w", err)
	}
	sealed, err := s.pendingSealer.Seal(b)
	if err != nil {
		return "", fmt.Errorf("oauth: seal pending request: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// OpenPending reads a value made by SealPending. It reports false for
// anything altered, sealed under another key, expired, or sealed for
// another id than id (a cookie renamed to stand for another request).
func (s *Service) OpenPending(id, value string) (Pending, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil {
		return Pending{}, false
	}
	b, err := s.pendingSealer.Open(raw)
	if err != nil {
		return Pending{}, false
	}
	var p Pending
	if err := json.Unmarshal(b, &p); err != nil || p.ID != id || p.ExpiredAt(s.now()) {
		return Pending{}, false
	}
	return p, true
}
