package dispatch

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/outbound"
	"gatehouse/internal/webhook/sender"
)

// AppTTL bounds how stale a replica's copy of an endpoint's webhook
// secrets (and rate limit) can be: a rotation (or its end,
// endSecretOverlap) signs on every replica at most this long after its
// commit, and at once on the replica that made it (the WebhookEndpoint
// hook drops the entry).
const AppTTL = 500 * time.Millisecond

const appTTL = AppTTL

// appInfo is what attempts need of an endpoint and its app, secrets
// unsealed: kept only in memory, never logged.
type appInfo struct {
	key           string // the app's key
	secret        string // "" when none can be unsealed
	previous      string
	previousUntil time.Time
	rateLimit     int // deliveries per second; 0: no limit
	// url is the endpoint's URL when it was read and urlErr what
	// ValidateCallbackURL said of it: deliveries queued to that URL (all
	// but those queued before a change of it) are not parsed again on
	// every attempt.
	url    string
	urlErr error
	// retry is the endpoint's retry schedule (nil: the default); headers
	// its custom headers, cert its client certificate (nil: none).
	// egressErr says why they could not be read (another master key):
	// attempts fail with it rather than go out without them.
	retry     []int
	headers   []sender.Header
	cert      *outbound.ClientCert
	egressErr error
}

// checkURL is sender.ValidateCallbackURL(u, true), from the endpoint's load when
// u is the endpoint's URL then.
func (a *appInfo) checkURL(u string) error {
	if u == a.url {
		return a.urlErr
	}
	return sender.ValidateCallbackURL(u, true)
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

// appCache serves endpoints' webhook secrets from memory for at most
// appTTL after the read they come from, so an attempt costs no read and
// no unsealing; concurrent misses for one endpoint share one read.
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

// loadEndpoint reads an endpoint with its app's key and unseals its
// secrets. A secret that cannot be unsealed (another master key) or
// parsed is left out. A deleted endpoint is ent's not-found error.
func (s *Dispatcher) loadEndpoint(ctx context.Context, id int) (*appInfo, error) {
	ep, err := s.client.WebhookEndpoint.Query().Where(webhookendpoint.ID(id)).
		WithApp(func(q *ent.PartnerAppQuery) { q.Select(partnerapp.FieldAppKey) }).
		Only(ctx)
	if err != nil {
		return nil, err
	}
	info := &appInfo{key: ep.Edges.App.AppKey, url: ep.URL, urlErr: sender.ValidateCallbackURL(ep.URL, true)}
	info.secret = s.unseal(&ep.Secret)
	if ep.PreviousSecretExpiresAt != nil {
		info.previous = s.unseal(ep.PreviousSecret)
		info.previousUntil = *ep.PreviousSecretExpiresAt
	}
	if ep.RateLimit != nil {
		info.rateLimit = *ep.RateLimit
	}
	info.retry = ep.RetrySchedule
	if ep.Headers != nil {
		info.headers, info.egressErr = sender.OpenHeaders(s.sealer, *ep.Headers)
	}
	if ep.ClientCertificate != nil && ep.ClientKey != nil && info.egressErr == nil {
		info.cert, info.egressErr = sender.OpenClientCert(s.sealer, *ep.ClientCertificate, *ep.ClientKey)
	}
	return info, nil
}

func (s *Dispatcher) unseal(sealed *[]byte) string {
	if sealed == nil {
		return ""
	}
	p, err := s.sealer.Open(*sealed)
	if err != nil {
		return ""
	}
	if _, err := sender.ParseSecret(string(p)); err != nil {
		return ""
	}
	return string(p)
}
