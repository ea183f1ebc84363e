package identity

import (
	"context"
	"fmt"
	"time"

	"gatehouse/internal/kv"
	"gatehouse/internal/secret"
)

// Login throttling: at most DefaultLoginAttempts login attempts per
// username that do not succeed within DefaultLoginWindow, counted from the
// first of them. A successful login clears the count.
const (
	DefaultLoginAttempts = 10
	DefaultLoginWindow   = 15 * time.Minute
)

const throttlePrefix = "login:attempts:"

// LoginThrottle limits password guessing per username, across replicas
// when the store is Redis.
//
// An attempt is counted BEFORE the password is checked (one atomic
// increment), so concurrent guesses cannot all slip in under the limit
// while the slow password hash runs; a success then clears the count. Once
// the limit is reached every attempt is refused, with the right password
// too, so a refusal tells an attacker nothing about the password.
type LoginThrottle struct {
	store  kv.Store
	limit  int64
	window time.Duration
}

// NewLoginThrottle allows limit attempts per username per window.
func NewLoginThrottle(store kv.Store, limit int, window time.Duration) *LoginThrottle {
	return &LoginThrottle{store: store, limit: int64(limit), window: window}
}

// Window is the length of the counting window.
func (t *LoginThrottle) Window() time.Duration { return t.window }

// Limit is the number of attempts allowed per window.
func (t *LoginThrottle) Limit() int { return int(t.limit) }

// key hashes the username: it is attacker-chosen text of any length.
func (t *LoginThrottle) key(username string) string {
	return throttlePrefix + secret.HashToken(username)
}

// Attempt counts one login attempt for username and reports whether it may
// go ahead.
func (t *LoginThrottle) Attempt(ctx context.Context, username string) (bool, error) {
	n, err := t.store.Incr(ctx, t.key(username), t.window)
	if err != nil {
		return false, fmt.Errorf("identity: count login attempt: %w", err)
	}
	return n <= t.limit, nil
}

// Succeeded clears the count of username after a successful login.
func (t *LoginThrottle) Succeeded(ctx context.Context, username string) error {
	if err := t.store.Del(ctx, t.key(username)); err != nil {
		return fmt.Errorf("identity: clear login attempts: %w", err)
	}
	return nil
}
