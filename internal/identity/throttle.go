package identity

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"gatehouse/internal/kv"
	"gatehouse/internal/secret"
)

// Login throttling. Failures are counted per (username, client address):
// DefaultLoginAttempts of them within DefaultLoginWindow refuse further
// attempts from that address for that user only, so a stranger guessing
// passwords cannot lock the real user out from another address. Per
// username across every address, DefaultLoginUserAttempts failures refuse
// everyone: the cap on a guesser with many addresses.
const (
	DefaultLoginAttempts     = 10
	DefaultLoginUserAttempts = 100
	DefaultLoginWindow       = 15 * time.Minute
)

const (
	throttlePairPrefix = "login:attempts:pair:"
	throttleUserPrefix = "login:attempts:user:"
)

// LoginThrottle limits password guessing, across replicas when the store
// is Redis.
//
// An attempt is counted BEFORE the password is checked (atomic
// increments), so concurrent guesses cannot all slip in under a limit
// while the slow password hash runs; a success then takes its attempt back.
// Once a limit is reached every attempt it covers is refused, the right
// password too, so a refusal tells an attacker nothing about the password.
type LoginThrottle struct {
	store     kv.Store
	pairLimit int64
	userLimit int64
	window    time.Duration
}

// NewLoginThrottle allows pairLimit failures per (username, address) and
// userLimit per username, each per window counted from its first failure.
func NewLoginThrottle(store kv.Store, pairLimit, userLimit int, window time.Duration) *LoginThrottle {
	return &LoginThrottle{store: store, pairLimit: int64(pairLimit), userLimit: int64(userLimit), window: window}
}

// Window is the length of the counting window.
func (t *LoginThrottle) Window() time.Duration { return t.window }

// Keys hash the username and address: attacker-chosen text of any length.
func (t *LoginThrottle) pairKey(username, addr string) string {
	return throttlePairPrefix + secret.HashToken(username+"\x00"+throttleAddr(addr))
}

// throttleAddr groups IPv6 addresses by their /64: one subscriber usually
// holds a whole /64, and counting each of its 2^64 addresses apart would
// give a guesser a fresh budget per address.
func throttleAddr(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() || a.Is4In6() {
		return addr
	}
	p, err := a.Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
}

func (t *LoginThrottle) userKey(username string) string {
	return throttleUserPrefix + secret.HashToken(username)
}

// Attempt counts one login attempt for username from client address addr
// and reports whether it may go ahead. An attempt refused for the pair is
// not counted for the username: one address alone cannot spend the
// username's budget beyond its own limit.
func (t *LoginThrottle) Attempt(ctx context.Context, username, addr string) (bool, error) {
	n, err := t.store.Incr(ctx, t.pairKey(username, addr), t.window)
	if err != nil {
		return false, fmt.Errorf("identity: count login attempt: %w", err)
	}
	if n > t.pairLimit {
		return false, nil
	}
	n, err = t.store.Incr(ctx, t.userKey(username), t.window)
	if err != nil {
		return false, fmt.Errorf("identity: count login attempt: %w", err)
	}
	return n <= t.userLimit, nil
}

// Succeeded takes back the attempt of a successful login: the pair's
// count is cleared (the user at that address knows the password), and the
// username's count loses this attempt but keeps the failures of others.
func (t *LoginThrottle) Succeeded(ctx context.Context, username, addr string) error {
	if err := t.store.Del(ctx, t.pairKey(username, addr)); err != nil {
		return fmt.Errorf("identity: clear login attempts: %w", err)
	}
	if err := t.store.Decr(ctx, t.userKey(username)); err != nil {
		return fmt.Errorf("identity: clear login attempts: %w", err)
	}
	return nil
}
