package partner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/internal/errs"
)

// DefaultCacheTTL bounds the staleness of a replica's view of an app: a
// change committed to the database (disable, new rate limit, rotation,
// expire date) is used by every replica's signed-request checks at most
// this long after the commit. It is well inside the promised 1 s, and
// costs each replica about two database reads per second per active app,
// whatever the request rate.
const DefaultCacheTTL = 500 * time.Millisecond

// maxCacheEntries bounds the cache's memory, including entries that
// remember an unknown app_key (so that a flood of made-up keys does not
// reach the database on every request).
const maxCacheEntries = 100_000

// credentials is what the signed-request checks need of an app, with its
// secrets unsealed: kept only in memory, never logged.
type credentials struct {
	app           App
	secret        []byte
	previous      []byte // nil when there is none
	previousUntil time.Time
}

// secretsAt returns the secrets that verify at now: the current one, and
// the previous one while its overlap lasts.
func (c *credentials) secretsAt(now time.Time) [][]byte {
	if c.previous != nil && now.Before(c.previousUntil) {
		return [][]byte{c.secret, c.previous}
	}
	return [][]byte{c.secret}
}

type cacheEntry struct {
	cred   *credentials // nil: no app has this key
	loaded time.Time    // when the load began: the data is at least this fresh
}

// appCache serves app credentials from memory for at most ttl after the
// database read they come from. Concurrent misses for one key share one
// read (singleflight).
type appCache struct {
	ttl  time.Duration
	now  func() time.Time // monotonic wall clock; staleness is real time
	load func(ctx context.Context, key string) (*credentials, error)

	mu        sync.RWMutex
	entries   map[string]cacheEntry
	gen       uint64 // bumped by forget, so a load that raced a write is not stored
	lastSweep time.Time

	group singleflight.Group
}

func newAppCache(load func(context.Context, string) (*credentials, error)) *appCache {
	return &appCache{ttl: DefaultCacheTTL, now: time.Now, load: load, entries: make(map[string]cacheEntry)}
}

// get returns the credentials of key, or nil when no app has that key.
func (c *appCache) get(ctx context.Context, key string) (*credentials, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if ok && now.Sub(e.loaded) < c.ttl {
		return e.cred, nil
	}
	ch := c.group.DoChan(key, func() (any, error) {
		c.mu.RLock()
		gen := c.gen
		e, ok := c.entries[key]
		c.mu.RUnlock()
		if ok && c.now().Sub(e.loaded) < c.ttl {
			// A read that finished between this caller's miss and now
			// filled it: no second read.
			return e.cred, nil
		}
		start := c.now()
		// The read is shared by every waiter: it must not die with the
		// first caller's request.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		cred, err := c.load(lctx, key)
		if err != nil {
			return nil, err
		}
		c.store(key, cacheEntry{cred: cred, loaded: start}, gen)
		return cred, nil
	})
	// Each caller waits only as long as its own request may: the shared
	// read goes on for the others (and fills the cache).
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*credentials), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: load app: %w", errs.Unavailable, context.Cause(ctx))
	}
}

func (c *appCache) store(key string, e cacheEntry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return // written meanwhile on this replica: the next request reloads
	}
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxCacheEntries {
		if e.loaded.Sub(c.lastSweep) < c.ttl {
			return // full of fresh entries: serve uncached rather than sweep on every miss
		}
		c.lastSweep = e.loaded
		for k, old := range c.entries {
			if e.loaded.Sub(old.loaded) >= c.ttl {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCacheEntries {
			return
		}
	}
	c.entries[key] = e
}

// forget drops key after a write on this replica, so that this replica
// sees its own changes at once (others within ttl).
func (c *appCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.entries, key)
}

// loadCredentials reads an app and unseals its secrets.
func (s *Service) loadCredentials(ctx context.Context, key string) (*credentials, error) {
	row, err := s.client.PartnerApp.Query().Where(partnerapp.AppKey(key)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: load app: %w", errs.Unavailable, err)
	}
	cred := &credentials{app: fromEnt(row)}
	if cred.secret, err = s.sealer.Open(row.Secret); err != nil {
		return nil, fmt.Errorf("open secret of app %d: %w", row.ID, err)
	}
	if row.PreviousSecret != nil && row.PreviousSecretExpiresAt != nil {
		if cred.previous, err = s.sealer.Open(*row.PreviousSecret); err != nil {
			return nil, fmt.Errorf("open previous secret of app %d: %w", row.ID, err)
		}
		cred.previousUntil = *row.PreviousSecretExpiresAt
	}
	return cred, nil
}
