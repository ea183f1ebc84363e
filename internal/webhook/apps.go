package webhook

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"gatehouse/ent/partnerapp"
)

// AppTTL bounds how stale a replica's copy of an app's webhook secrets
// can be: a rotation (or its end, endSecretOverlap) signs on every replica
// at most this long after its commit, and at once on the replica that
// made it (the PartnerApp hook drops the entry).
const AppTTL = 500 * time.Millisecond

const appTTL = AppTTL

// appInfo is what attempts need of an app, secrets unsealed: kept only in
// memory, never logged.
type appInfo struct {
	key           string
	secret        string // "" when none can be unsealed
	previous      string
	previousUntil time.Time
}

// signingSecrets returns the secrets that sign at now: the current one,
// then the previous one while its rotation overlap lasts.
func (a *appInfo) signingSecrets(now time.Time) []string {
	var out []string
	if a.secret != "" {
		out = append(out, a.secret)
	}
	if a.previous != "" && now.Before(a.previousUntil) {
		out = append(out, a.previous)
	}
	return out
}

type appEntry struct {
	info   *appInfo
	loaded time.Time
}

// appCache serves apps' webhook secrets from memory for at most appTTL
// after the read they come from, so an attempt costs no read and no
// unsealing; concurrent misses for one app share one read.
type appCache struct {
	load func(ctx context.Context, id int) (*appInfo, error)

	mu      sync.RWMutex
	entries map[int]appEntry
	gen     uint64 // bumped by forget: a load that raced a write is not stored
	group   singleflight.Group
}

func newAppCache(load func(context.Context, int) (*appInfo, error)) *appCache {
	return &appCache{load: load, entries: make(map[int]appEntry)}
}

func (c *appCache) get(ctx context.Context, id int) (*appInfo, error) {
	c.mu.RLock()
	e, ok := c.entries[id]
	gen := c.gen
	c.mu.RUnlock()
	if ok && time.Since(e.loaded) < appTTL {
		return e.info, nil
	}
	v, err, _ := c.group.Do(strconv.Itoa(id), func() (any, error) {
		start := time.Now()
		// The read is shared by every waiter: it must not die with the
		// first caller's attempt.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		info, err := c.load(lctx, id)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.gen == gen {
			if len(c.entries) > 100_000 {
				clear(c.entries) // bounded memory; reloaded on demand
			}
			c.entries[id] = appEntry{info: info, loaded: start}
		}
		c.mu.Unlock()
		return info, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*appInfo), nil
}

func (c *appCache) forget(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.entries, id)
}

func (c *appCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
}

// loadApp reads an app and unseals its webhook secrets. A secret that
// cannot be unsealed (another master key) or parsed is left out.
func (s *Service) loadApp(ctx context.Context, id int) (*appInfo, error) {
	app, err := s.client.PartnerApp.Query().Where(partnerapp.ID(id)).
		Select(partnerapp.FieldAppKey, partnerapp.FieldWebhookSecret,
			partnerapp.FieldPreviousWebhookSecret, partnerapp.FieldPreviousWebhookSecretExpiresAt).
		Only(ctx)
	if err != nil {
		return nil, err
	}
	info := &appInfo{key: app.AppKey}
	info.secret = s.unseal(app.WebhookSecret)
	if app.PreviousWebhookSecretExpiresAt != nil {
		info.previous = s.unseal(app.PreviousWebhookSecret)
		info.previousUntil = *app.PreviousWebhookSecretExpiresAt
	}
	return info, nil
}

func (s *Service) unseal(sealed *[]byte) string {
	if sealed == nil {
		return ""
	}
	p, err := s.sealer.Open(*sealed)
	if err != nil {
		return ""
	}
	if _, err := ParseSecret(string(p)); err != nil {
		return ""
	}
	return string(p)
}
