package kv

import (
	"context"
	"time"
)

// SessionStore keeps scs sessions in a Store under prefix (one key per
// session, so any topology, a cluster included, serves it). It implements
// scs's Store and CtxStore.
type SessionStore struct {
	Store  Store
	Prefix string
}

// FindCtx returns the session's data, if it exists and has not expired.
func (s SessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	return s.Store.Get(ctx, s.Prefix+token)
}

// CommitCtx stores the session until expiry; one already expired is deleted.
func (s SessionStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	ttl := time.Until(expiry)
	if ttl <= 0 {
		// A ttl <= 0 would mean "no expiry" to Set.
		return s.Store.Del(ctx, s.Prefix+token)
	}
	return s.Store.Set(ctx, s.Prefix+token, b, ttl)
}

// DeleteCtx removes the session.
func (s SessionStore) DeleteCtx(ctx context.Context, token string) error {
	return s.Store.Del(ctx, s.Prefix+token)
}

// Find is FindCtx without a context (scs's Store).
func (s SessionStore) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}

// Commit is CommitCtx without a context (scs's Store).
func (s SessionStore) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}

// Delete is DeleteCtx without a context (scs's Store).
func (s SessionStore) Delete(token string) error {
	return s.DeleteCtx(context.Background(), token)
}
