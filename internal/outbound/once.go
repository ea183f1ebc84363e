package outbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// Lifetimes of an idempotency key of outbound payments (specification,
// "Limits").
const (
	// OnceLockTTL bounds how long a caller may hold the key while its call
	// runs; a crashed holder blocks the key no longer than this.
	OnceLockTTL = 5 * time.Minute
	// OnceResultTTL is how long a successful result is replayed.
	OnceResultTTL = 24 * time.Hour
)

// ErrInProgress means another caller holds the idempotency key and its call
// has not finished; retry later.
var ErrInProgress = errors.New("outbound: call with this idempotency key in progress")

// KV is the key-value store CallOnce needs. gatehouse/internal/kv (Redis or
// in-process) satisfies it; values expire after ttl.
type KV interface {
	// SetNX stores value only if key does not exist and reports whether it did.
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Get returns the value and whether the key exists.
	Get(ctx context.Context, key string) ([]byte, bool, error)
	Del(ctx context.Context, keys ...string) error
}

// CallOnce runs fn at most once per key within OnceResultTTL and replays
// its result to later callers. While one caller runs fn (holding a lock for
// at most OnceLockTTL), others get ErrInProgress. When fn fails the lock is
// released and nothing is stored, so the call may be tried again.
//
// If fn succeeds but its result cannot be stored, the result is returned
// together with the error, and the lock is left to expire so that no second
// call starts while the store is failing.
func CallOnce(ctx context.Context, store KV, key string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	resultKey, lockKey := "outbound:once:"+key+":result", "outbound:once:"+key+":lock"
	if res, ok, err := store.Get(ctx, resultKey); err != nil || ok {
		return res, wrapStore(err)
	}
	token := []byte(newNonce())
	acquired, err := store.SetNX(ctx, lockKey, token, OnceLockTTL)
	if err != nil {
		return nil, wrapStore(err)
	}
	// Look again in both cases: the previous holder may have stored its
	// result and released the lock between our first look and SetNX.
	res, ok, err := store.Get(ctx, resultKey)
	switch {
	case err != nil:
		if acquired {
			unlock(ctx, store, lockKey, token)
		}
		return nil, wrapStore(err)
	case ok:
		if acquired {
			unlock(ctx, store, lockKey, token)
		}
		return res, nil
	case !acquired:
		return nil, ErrInProgress
	}

	res, err = fn(ctx)
	if err != nil {
		unlock(ctx, store, lockKey, token)
		return nil, err
	}
	// The result records something that happened elsewhere: it is stored
	// even when the caller gave up meanwhile.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := store.Set(sctx, resultKey, res, OnceResultTTL); err != nil {
		return res, fmt.Errorf("outbound: storing result of idempotent call: %w", err)
	}
	unlock(ctx, store, lockKey, token)
	return res, nil
}

// storeTimeout bounds the store calls CallOnce makes after the caller's
// context may have ended (storing the result, releasing the lock).
const storeTimeout = 5 * time.Second

// unlock deletes the lock if it is still ours. If fn outlived the lock
// another caller may hold it now; KV has no compare-and-delete, so a tiny
// window remains between the check and the delete.
func unlock(ctx context.Context, store KV, lockKey string, token []byte) {
	// A canceled caller must still release the lock.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if cur, ok, err := store.Get(ctx, lockKey); err == nil && ok && bytes.Equal(cur, token) {
		_ = store.Del(ctx, lockKey)
	}
}

func wrapStore(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("outbound: idempotency store: %w", err)
}
